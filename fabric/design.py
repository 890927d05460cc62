"""The cabling design: every switch and host HCA by physical name, every expected link.

File format (YAML; `fabric design check FILE` validates one):

    fabric: sim                  # a name for reports
    defaults: {width: 4X, speed: HDR}   # the expected rate; required unless every link gives its own
    switches:
      - {name: leaf-1-03-U40, model: QM8700, ports: 40, tier: 1, row: "1", rack: "03", u: 40}
    hosts:
      - {name: gpu-r1-01, hcas: [mlx5_0, mlx5_1], row: "1", rack: "01", u: 1}
    links:
      # [switch or host/hca, port, peer, peer port, cable id]
      - [leaf-1-03-U40, 1, gpu-r1-01/mlx5_0, 1, C0001]
      - {a: leaf-1-03-U40, a_port: 2, b: gpu-r1-01/mlx5_1, b_port: 1, cable: C0002, width: 4X, speed: HDR}

A host HCA is named `<host>/<hca>` (the node description an HCA reports is `<host> <hca>`); its port is 1.
Switch and host entries may carry a `guid` (hosts: `guids: {mlx5_0: "0x..."}`) when it is known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from fabric.errors import DesignError
from fabric.parsers.common import norm_guid
from fabric.speeds import SPEED_RANK, WIDTH_LANES, normalise_speed, normalise_width
from fabric.topology import NodeType
from provision.site.bounded import MAX_DESIGN_BYTES, MAX_DESIGN_NODES, InputRefused, load_yaml, read_text

MAX_PROBLEMS = 40
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]*(/[A-Za-z0-9._:+-]+)?$")


class Port(NamedTuple):
    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}[{self.port}]"


def _natural(s: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(t), "") if t.isdigit() else (-1, t) for t in re.findall(r"\d+|\D+", s))


@dataclass(frozen=True, slots=True)
class Location:
    row: str
    rack: str
    u: int | None = None

    def sort_key(self) -> tuple[object, ...]:
        return (_natural(self.row), _natural(self.rack), self.u if self.u is not None else 10_000)

    def __str__(self) -> str:
        u = f" U{self.u}" if self.u is not None else ""
        return f"row {self.row} rack {self.rack}{u}"

    def to_dict(self) -> dict[str, object]:
        return {"row": self.row, "rack": self.rack, "u": self.u}


class DesignNode(NamedTuple):
    name: str
    type: NodeType
    ports: int
    tier: int = 0
    model: str | None = None
    location: Location | None = None
    guid: str | None = None
    host: str | None = None
    hca: str | None = None


class DesignLink(NamedTuple):
    a: Port
    b: Port
    width: str | None  # None: not known (a baseline capture without the link's rate); a design file always has it
    speed: str | None
    cable: str | None = None
    number: int = 0

    def other(self, p: Port) -> Port:
        return self.b if p == self.a else self.a

    def rate(self) -> str:
        """'4X NDR'; '?' for a width or speed that is not known."""
        return f"{self.width or '?'} {self.speed or '?'}"


@dataclass(frozen=True)
class Design:
    name: str
    width: str | None  # the file's `defaults` (None: every link carries its own)
    speed: str | None
    nodes: Mapping[str, DesignNode]
    links: tuple[DesignLink, ...]
    source: str = "<design>"
    by_port: Mapping[Port, DesignLink] = field(default_factory=dict, compare=False, repr=False)

    def switches(self) -> list[DesignNode]:
        return [n for n in self.nodes.values() if n.type is NodeType.SWITCH]

    def cas(self) -> list[DesignNode]:
        return [n for n in self.nodes.values() if n.type is not NodeType.SWITCH]

    def link_tier(self, link: DesignLink) -> int:
        return max(self.nodes[link.a.node].tier, self.nodes[link.b.node].tier)

    def tier_names(self) -> dict[int, str]:
        top = max((n.tier for n in self.switches()), default=1)
        names = {1: "host-leaf", 2: "leaf-spine", 3: "spine-core"}
        return {t: names.get(t, f"tier{t - 1}-tier{t}") for t in range(1, top + 1)}


def build_design(
    name: str,
    width: str | None,
    speed: str | None,
    nodes: list[DesignNode],
    links: list[DesignLink],
    source: str = "<design>",
) -> Design:
    """Check a design assembled in code or read from a file; raises DesignError listing every problem."""
    problems: list[str] = []
    by_name: dict[str, DesignNode] = {}
    for n in nodes:
        if n.name in by_name:
            problems.append(f"duplicate node name {n.name!r}")
        by_name[n.name] = n
    by_port: dict[Port, DesignLink] = {}
    for link in links:
        where = f"link {link.number}" + (f" (cable {link.cable})" if link.cable else "")
        ok = True
        for p in (link.a, link.b):
            node = by_name.get(p.node)
            if node is None:
                problems.append(f"{where}: {p.node!r} is not a declared switch or host HCA")
                ok = False
            elif not 1 <= p.port <= node.ports:
                problems.append(f"{where}: port {p.port} of {p.node} is outside 1..{node.ports}")
                ok = False
        if link.a == link.b:
            problems.append(f"{where}: both ends are {link.a}")
            ok = False
        if not ok:
            continue
        for p in (link.a, link.b):
            other = by_port.get(p)
            if other is not None:
                problems.append(f"{where}: duplicate port {p} (already used by link {other.number}"
                                + (f", cable {other.cable}" if other.cable else "") + ")")
            else:
                by_port[p] = link
    if problems:
        extra = len(problems) - MAX_PROBLEMS
        problems = problems[:MAX_PROBLEMS] + ([f"... and {extra} more"] if extra > 0 else [])
        raise DesignError(source, problems)
    return Design(name=name, width=width, speed=speed, nodes=by_name, links=tuple(links), source=source,
                  by_port=by_port)


def load_design(path: Path) -> Design:
    try:
        text = read_text(path, limit=MAX_DESIGN_BYTES, what="design file")
    except (OSError, UnicodeDecodeError, InputRefused) as e:
        raise DesignError(str(path), [f"cannot read the design file: {e}"]) from None
    return parse_design(text, str(path))


_TOP = re.compile(r"^([A-Za-z_]\w*):\s*(.*)$")


def _fast_load(text: str) -> dict[str, Any] | None:
    """Read a file in the layout `dump_design` writes (one JSON flow item per line) without the YAML
    constructor: 13k links load in ~0.05 s instead of ~0.9 s. None means "not that layout, use YAML"."""
    data: dict[str, Any] = {}
    section: list[Any] | None = None
    loads = json.loads
    for line in text.split("\n"):
        if line.startswith("  - "):
            if section is None:
                return None
            try:
                section.append(loads(line[4:]))
            except (ValueError, RecursionError):  # deeply nested: the bounded YAML path says so
                return None
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _TOP.match(line)
        if m is None:
            return None
        key, value = m.groups()
        if value.split("#")[0].strip():
            section = None
            try:
                data[key] = load_yaml(value, max_nodes=MAX_DESIGN_NODES)  # one line can hold an alias bomb
            except (yaml.YAMLError, InputRefused):
                return None
        else:
            section = data[key] = []
    return data


def parse_design(text: str, source: str = "<design>") -> Design:
    data = _fast_load(text)
    if data is not None:
        return design_from_dict(data, source)
    try:
        data = load_yaml(text, max_nodes=MAX_DESIGN_NODES)
    except (yaml.YAMLError, InputRefused) as e:  # InputRefused: aliases expanding past the bound
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise DesignError(source, [f"{where}not valid YAML ({getattr(e, 'problem', e)})"]) from None
    return design_from_dict(data, source)


def _loc(entry: Mapping[str, Any]) -> Location | None:
    if entry.get("row") is None and entry.get("rack") is None:
        return None
    u = entry.get("u")
    return Location(str(entry.get("row", "")), str(entry.get("rack", "")), int(u) if u is not None else None)


_TOP_KEYS = ("fabric", "defaults", "switches", "hosts", "links")


def _shape_problems(data: dict[str, Any]) -> list[str]:
    """Keys the format does not have (a typo would drop a section silently), and a design with nothing in it."""
    problems = [f"unknown key {str(k)[:80]!r} (known: {', '.join(_TOP_KEYS)})" for k in data if k not in _TOP_KEYS]
    if not data.get("switches") and not data.get("hosts") and not data.get("links"):
        problems.append("the design declares no switches, hosts or links: nothing to check a fabric against")
    elif not data.get("links"):
        problems.append("the design declares no links: every cable the fabric should have is listed under links")
    return problems[:MAX_PROBLEMS]


def design_from_dict(data: Any, source: str = "<design>") -> Design:
    if not isinstance(data, dict):
        raise DesignError(source, ["expected a mapping with 'switches', 'hosts' and 'links'"])
    shape = _shape_problems(data)
    if shape:
        raise DesignError(source, shape)
    problems: list[str] = []
    width, speed = _default_rate(data, problems)
    nodes = _nodes(data, problems)
    unrated: dict[str, list[str]] = {"width": [], "speed": []}
    links = _design_links(data, width, speed, problems, unrated)
    unrated_problems = [
        f"no expected {what} for link{'s' if len(which) > 1 else ''} {', '.join(which[:5])}"
        + (f" and {len(which) - 5} more" if len(which) > 5 else "")
        + f": set defaults.{what} (e.g. `defaults: {{width: 4X, speed: NDR}}`) or the link's {what}"
        for what, which in unrated.items() if which
    ]
    if problems:
        raise DesignError(source, (unrated_problems + problems)[:MAX_PROBLEMS])
    try:
        design = build_design(str(data.get("fabric", "fabric")), width, speed, nodes, links, source)
    except DesignError as e:
        raise DesignError(source, unrated_problems + e.problems) from None
    if unrated_problems:
        raise DesignError(source, unrated_problems)
    return design


def _default_rate(data: dict[str, Any], problems: list[str]) -> tuple[str | None, str | None]:
    """The file's `defaults` width and speed (None where it gives none or a bad one, which goes to `problems`)."""
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        problems.append(f"defaults must be a mapping like {{width: 4X, speed: NDR}}, not {defaults!r}")
        defaults = {}
    # The expected rate is a fact of the site: it comes from `defaults` or the link, never from here.
    width = normalise_width(str(defaults["width"])) if defaults.get("width") else None
    speed = normalise_speed(str(defaults["speed"])) if defaults.get("speed") else None
    if defaults.get("width") and width is None:
        problems.append(f"defaults.width {defaults.get('width')!r} is not one of {', '.join(WIDTH_LANES)}")
    if defaults.get("speed") and speed is None:
        problems.append(f"defaults.speed {defaults.get('speed')!r} is not one of {', '.join(SPEED_RANK)}")
    return width, speed


def _nodes(data: dict[str, Any], problems: list[str]) -> list[DesignNode]:
    """The switches, then one node per HCA of every host (named `<host>/<hca>`)."""
    nodes: list[DesignNode] = []
    for i, sw in enumerate(data.get("switches") or []):
        try:
            name = str(sw["name"])
            if not _NAME.match(name) or "/" in name:
                problems.append(f"switch {i}: name {name!r} must be letters, digits and . _ : + - (no '/')")
            guid = norm_guid(str(sw["guid"]))[0] if sw.get("guid") else None
            nodes.append(DesignNode(name=name, type=NodeType.SWITCH, ports=int(sw["ports"]),
                                    tier=int(sw.get("tier", 1)), model=sw.get("model"), location=_loc(sw),
                                    guid=guid))
        except (KeyError, TypeError, ValueError) as e:
            problems.append(f"switch {i}: needs name, ports (number) and tier (number): {e!r}")
    for i, host in enumerate(data.get("hosts") or []):
        try:
            hname = str(host["name"])
            guids = host.get("guids") or {}
            for hca in host["hcas"]:
                guid = norm_guid(str(guids[hca]))[0] if hca in guids else None
                nodes.append(DesignNode(name=f"{hname}/{hca}", type=NodeType.CA, ports=int(host.get("ports", 1)),
                                        tier=0, model=host.get("model"), location=_loc(host), guid=guid,
                                        host=hname, hca=str(hca)))
        except (KeyError, TypeError, ValueError) as e:
            problems.append(f"host {i}: needs name and hcas (a list): {e!r}")
    return nodes


def _design_links(data: dict[str, Any], width: str | None, speed: str | None, problems: list[str],
                  unrated: dict[str, list[str]]) -> list[DesignLink]:
    """The `links` (lists or mappings), numbered from 1; a link without a width or speed goes to `unrated`."""
    links: list[DesignLink] = []
    for i, raw in enumerate(data.get("links") or [], start=1):
        try:
            a, ap, b, bp, cable, extra = _link_fields(raw)
            lw = normalise_width(str(extra["width"])) if extra.get("width") else width
            ls = normalise_speed(str(extra["speed"])) if extra.get("speed") else speed
            if (extra.get("width") and lw is None) or (extra.get("speed") and ls is None):
                raise ValueError(f"bad width/speed {extra.get('width')!r}/{extra.get('speed')!r}")
            where = f"{i}" + (f" (cable {cable})" if cable is not None else "")
            for what, value in (("width", lw), ("speed", ls)):
                if value is None:
                    unrated[what].append(where)
            # (kept with "?" so that the checks below still name every other problem of the file)
            links.append(DesignLink(Port(str(a), int(ap)), Port(str(b), int(bp)), lw or "?", ls or "?",
                                    str(cable) if cable is not None else None, number=i))
        except (KeyError, TypeError, ValueError) as e:
            problems.append(f"link {i}: {e}")
    return links


def _link_fields(raw: Any) -> tuple[Any, Any, Any, Any, Any, dict[str, Any]]:
    """A link entry (a list or a mapping) as (a, a_port, b, b_port, cable, {width, speed})."""
    if isinstance(raw, list | tuple):
        if len(raw) not in (4, 5, 6):
            raise ValueError("expected [a, a_port, b, b_port, cable]")
        a, ap, b, bp = raw[:4]
        cable = raw[4] if len(raw) > 4 else None
        extra = raw[5] if len(raw) > 5 else {}
    elif isinstance(raw, dict):
        a, ap, b, bp, cable, extra = raw["a"], raw["a_port"], raw["b"], raw["b_port"], raw.get("cable"), raw
    else:
        raise ValueError("expected a list or a mapping")
    if not isinstance(extra, dict):
        raise ValueError(f"expected {{width, speed}} after the cable id, got {extra!r}")
    return a, ap, b, bp, cable, extra
