"""What `iblinkinfo` says about ports, as `fabric.findings.Finding`s the planner reads like validate's.

Without a design, iblinkinfo still tells a port that is down (`Down/ Polling`: its cable or transceiver,
`Down/ Disabled`: someone disabled it) and a link that trained below what both ends could do
(`( Could be 53.125 Gbps)`). With a design, `fabric validate`'s own findings say more (width too).
"""

from __future__ import annotations

from fabric.findings import FEnd, Finding
from fabric.identify import switch_name_from_description
from fabric.topology import NodeType, Topology


def _fend(top: Topology, guid: str, port: int) -> FEnd:
    node = top.nodes.get(guid)
    desc = node.description if node else None
    name = switch_name_from_description(desc) if node and desc and node.type is NodeType.SWITCH else desc
    return FEnd(guid, name, port, None, desc)


def findings_from_iblinkinfo(top: Topology) -> tuple[Finding, ...]:
    out: list[Finding] = []
    for down in top.down_ports:
        if down.end.guid.startswith("lid-"):
            continue
        out.append(Finding("port_down", _fend(top, down.end.guid, down.end.port), None, "LinkUp", down.state,
                           "reseat or replace the cable/transceiver" if "Polling" in down.state
                           else "re-enable once repaired"))
    for link in top.links:
        if link.could_be:
            out.append(Finding("degraded", _fend(top, link.a.guid, link.a.port),
                               _fend(top, link.b.guid, link.b.port), f"{link.could_be}",
                               f"{link.width or '?'} {link.speed or '?'}", "reseat or replace the cable"))
    return tuple(out)
