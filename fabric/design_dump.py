"""Writing a cabling design file: the documented format, one JSON flow item per switch, host and link,
which `fabric.design.parse_design` reads back without the slow YAML constructor."""

from __future__ import annotations

import json

from fabric.design import Design, DesignNode, Location
from fabric.errors import DesignError


def _j(value: object) -> str:
    return json.dumps(value, separators=(", ", ": "))


def _loc_fields(loc: Location | None) -> dict[str, object]:
    return {} if loc is None else {"row": loc.row, "rack": loc.rack, "u": loc.u}


def dump_design(design: Design, header: str = "") -> str:
    """YAML text in the documented format: one line per switch, host and link, each a JSON flow item
    (valid YAML, and `parse_design` reads it back without the slow YAML constructor)."""
    unrated = [str(link.number) for link in design.links if link.width is None or link.speed is None]
    if unrated:
        # Written without it, the link would read back with the file's defaults: an assumed rate.
        raise DesignError(design.source, [f"no expected width/speed for link{'s' if len(unrated) > 1 else ''} "
                                          f"{', '.join(unrated[:5])}" + (f" and {len(unrated) - 5} more"
                                                                         if len(unrated) > 5 else "")
                                          + ": cannot write it as a design file"])
    out: list[str] = [f"# {h}".rstrip() for h in header.splitlines()]
    out.append(f"fabric: {_j(design.name)}")
    defaults = ", ".join(f"{k}: {v}" for k, v in (("width", design.width), ("speed", design.speed)) if v)
    if defaults:
        out.append(f"defaults: {{{defaults}}}")
    out.append("switches:")
    for n in design.switches():
        entry: dict[str, object] = {"name": n.name}
        if n.model:
            entry["model"] = n.model
        entry |= {"ports": n.ports, "tier": n.tier, **_loc_fields(n.location)}
        if n.guid:
            entry["guid"] = f"0x{n.guid}"
        out.append(f"  - {_j(entry)}")
    out.append("hosts:")
    hosts: dict[str, list[DesignNode]] = {}
    for n in design.cas():
        hosts.setdefault(n.host or n.name, []).append(n)
    for host, hcas in hosts.items():
        entry = {"name": host, "hcas": [h.hca or h.name for h in hcas], **_loc_fields(hcas[0].location)}
        guids = {h.hca: f"0x{h.guid}" for h in hcas if h.guid}
        if guids:
            entry["guids"] = guids
        out.append(f"  - {_j(entry)}")
    out.append("links:")
    out.append("  # [switch or host/hca, port, peer, peer port, cable id, {width, speed} when not the default]")
    for link in design.links:
        row: list[object] = [link.a.node, link.a.port, link.b.node, link.b.port, link.cable]
        extra = {}
        if link.width != design.width:
            extra["width"] = link.width
        if link.speed != design.speed:
            extra["speed"] = link.speed
        if extra:
            row.append(extra)
        out.append(f"  - {_j(row)}")
    return "\n".join(out) + "\n"
