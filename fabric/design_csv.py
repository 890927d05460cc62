"""Import the cabling spreadsheet a datacenter partner sends (CSV) as a design.

Cabling CSV: one row per cable; header names are matched loosely (case, spaces, punctuation):
  cable id   : cable, cable_id, label, cable label
  end A      : a, source, src, from, start device, startdevice, source device
  port A     : a_port, source port, src port, from port, start port
  end B      : b, destination, dest, dst, to, end device, enddevice, destination device
  port B     : b_port, destination port, dest port, dst port, to port, end port
  rate       : width, speed (per row; a row without one takes the importer's width/speed, and with neither
               the import fails: the expected rate is a fact of the site, never assumed)
A host HCA is written `<host>/<hca>` or `<host> <hca>`; anything else is a switch.

Switch CSV (optional): name, model, ports, tier, row, rack, u. Without it, switches get the highest port
number seen as their port count, tiers by hops from the hosts, and a location parsed from a name of the
form `<tier>-<row>-<rack>-U<u>` when there is one.
"""

from __future__ import annotations

import csv
import io
import re

from fabric.design import Design, DesignLink, DesignNode, Location, Port, build_design
from fabric.errors import DesignError
from fabric.speeds import SPEED_RANK, WIDTH_LANES, normalise_speed, normalise_width
from fabric.topology import NodeType

_ALIASES = {
    "cable": {"cable", "cableid", "label", "cablelabel", "id"},
    "a": {"a", "source", "src", "from", "startdevice", "sourcedevice", "fieldsstartdevice", "device_a", "devicea"},
    "a_port": {"aport", "sourceport", "srcport", "fromport", "startport", "porta"},
    "b": {"b", "destination", "dest", "dst", "to", "enddevice", "destinationdevice", "deviceb"},
    "b_port": {"bport", "destinationport", "destport", "dstport", "toport", "endport", "portb"},
    "width": {"width", "linkwidth"},
    "speed": {"speed", "linkspeed", "rate"},
}
_EXAMPLE = {"width": "--width 4X", "speed": "--speed NDR"}
_LOCATED = re.compile(r"^[A-Za-z]+-(\w+)-(\w+)-U(\d+)$")


def _key(header: str) -> str | None:
    k = re.sub(r"[^a-z0-9_]", "", header.lower().replace(" ", "")).replace("_", "")
    for field, names in _ALIASES.items():
        if k in {n.replace("_", "") for n in names}:
            return field
    return None


def _rows(text: str, source: str) -> list[dict[str, str]]:
    text = text.lstrip("\ufeff")
    if "\x00" in text:
        raise DesignError(source, ["binary data: expected a CSV file"])
    reader = csv.reader(io.StringIO(text))
    try:
        rows = [r for r in reader if any(c.strip() for c in r)]
    except csv.Error as e:
        raise DesignError(source, [f"not CSV: {e}"]) from None
    if not rows:
        raise DesignError(source, ["empty CSV"])
    header = [h.lstrip("#").strip() for h in rows[0]]
    return [dict(zip(header, r, strict=False)) for r in rows[1:]] if header else []


def _norm_end(name: str) -> str:
    name = name.strip()
    if " " in name:
        host, hca = name.split(None, 1)
        return f"{host}/{hca.strip()}"
    return name


def _row_list(rows: list[int]) -> str:
    return f"row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:5]))}" + (
        f" and {len(rows) - 5} more" if len(rows) > 5 else "")


def parse_cabling_csv(text: str, switches_csv: str | None = None, source: str = "cabling.csv",
                      name: str = "fabric", width: str | None = None, speed: str | None = None) -> Design:
    """`width`/`speed`: the expected rate of rows that do not give their own (None: every row must)."""
    width, speed = _importer_rate(width, speed, source)
    raw_rows = _rows(text, source)
    if not raw_rows:
        raise DesignError(source, ["no rows after the header"])
    links, ends, max_port = _cable_links(raw_rows, width, speed, source)
    declared = _declared_switches(switches_csv, source) if switches_csv is not None else {}
    nodes = _cabled_nodes(links, ends, max_port, declared, switches_csv is not None, source)
    return build_design(name, width, speed, nodes, links, source=source)


def _importer_rate(width: str | None, speed: str | None, source: str) -> tuple[str | None, str | None]:
    """The importer's `width`/`speed` normalised (None stays None); a value that is neither fails the import."""
    bad = []
    if width and normalise_width(width) is None:
        bad.append(f"width {width!r} is not one of {', '.join(WIDTH_LANES)}")
    if speed and normalise_speed(speed) is None:
        bad.append(f"speed {speed!r} is not one of {', '.join(SPEED_RANK)}")
    if bad:
        raise DesignError(source, ["; ".join(bad)])
    return (normalise_width(width) if width else None), (normalise_speed(speed) if speed else None)


def _cable_links(raw_rows: list[dict[str, str]], width: str | None, speed: str | None,
                 source: str) -> tuple[list[DesignLink], set[str], dict[str, int]]:
    """One link per row (numbered by its line), the devices cabled and the highest port seen on each."""
    mapping = {h: _key(h) for h in raw_rows[0]}
    missing = [f for f in ("a", "a_port", "b", "b_port") if f not in mapping.values()]
    if missing:
        raise DesignError(source, [f"header {list(raw_rows[0])} lacks columns for {', '.join(missing)} "
                                   "(e.g. 'Source Device, Source Port, Destination Device, Destination Port')"])
    problems: list[str] = []
    links: list[DesignLink] = []
    ends: set[str] = set()
    max_port: dict[str, int] = {}
    unrated: dict[str, list[int]] = {"width": [], "speed": []}
    for i, row in enumerate(raw_rows, start=2):
        r = {mapping[h]: (v or "").strip() for h, v in row.items() if mapping.get(h)}
        try:
            a, b = _norm_end(r["a"]), _norm_end(r["b"])
            ap, bp = int(r["a_port"] or ("1" if "/" in a else "")), int(r["b_port"] or ("1" if "/" in b else ""))
        except (KeyError, ValueError):
            problems.append(f"row {i}: needs two devices and two port numbers, got {list(row.values())}")
            continue
        lw = normalise_width(r["width"]) if r.get("width") else width
        ls = normalise_speed(r["speed"]) if r.get("speed") else speed
        if (r.get("width") and lw is None) or (r.get("speed") and ls is None):
            problems.append(f"row {i}: unknown width/speed {r.get('width')!r}/{r.get('speed')!r}")
            continue
        for what, value in (("width", lw), ("speed", ls)):
            if value is None:
                unrated[what].append(i)
        if lw is None or ls is None:
            continue
        links.append(DesignLink(Port(a, ap), Port(b, bp), lw, ls, r.get("cable") or None, number=i))
        for n, p in ((a, ap), (b, bp)):
            ends.add(n)
            max_port[n] = max(max_port.get(n, 0), p)
    missing = [what for what, rows in unrated.items() if rows]
    if missing:
        rows = sorted({i for what in missing for i in unrated[what]})
        example = " ".join(_EXAMPLE[what] for what in missing)
        problems.insert(0, f"no expected {' or '.join(missing)} for {_row_list(rows)}: give "
                           f"{' and '.join(f'--{what}' for what in missing)} (e.g. {example}) "
                           f"or a {'/'.join(missing)} column")
    if problems:
        raise DesignError(source, problems)
    return links, ends, max_port


def _declared_switches(switches_csv: str, source: str) -> dict[str, DesignNode]:
    """The switch CSV's switches by name."""
    declared: dict[str, DesignNode] = {}
    problems: list[str] = []
    for j, row in enumerate(_rows(switches_csv, "switches.csv"), start=2):
        try:
            sloc = Location(row.get("row", ""), row.get("rack", ""), int(row["u"]) if row.get("u") else None)
            declared[row["name"].strip()] = DesignNode(
                name=row["name"].strip(), type=NodeType.SWITCH, ports=int(row["ports"]),
                tier=int(row.get("tier") or 1), model=row.get("model") or None,
                location=sloc if (sloc.row or sloc.rack) else None)
        except (KeyError, ValueError) as e:
            problems.append(f"switches.csv row {j}: needs name and ports: {e!r}")
    if problems:
        raise DesignError(source, problems)
    return declared


def _cabled_nodes(links: list[DesignLink], ends: set[str], max_port: dict[str, int],
                  declared: dict[str, DesignNode], switch_list_given: bool, source: str) -> list[DesignNode]:
    """A node for every cabled device: HCAs by name, switches from the switch list or inferred from the cabling."""
    hops = _tiers(links, {n for n in ends if "/" in n})
    problems: list[str] = []
    nodes: list[DesignNode] = []
    for n in sorted(ends):
        if "/" in n:
            host, hca = n.split("/", 1)
            nodes.append(DesignNode(name=n, type=NodeType.CA, ports=max(1, max_port[n]), host=host, hca=hca))
        elif n in declared:
            nodes.append(declared[n])
        elif switch_list_given:
            problems.append(f"{n!r} is cabled but not declared in the switch list")
        else:
            m = _LOCATED.match(n)
            loc = Location(m.group(1), m.group(2), int(m.group(3))) if m else None
            nodes.append(DesignNode(name=n, type=NodeType.SWITCH, ports=max_port[n], tier=hops.get(n, 1),
                                    location=loc))
    if problems:
        raise DesignError(source, problems)
    return nodes


def _tiers(links: list[DesignLink], cas: set[str]) -> dict[str, int]:
    adjacency: dict[str, set[str]] = {}
    for dl in links:
        adjacency.setdefault(dl.a.node, set()).add(dl.b.node)
        adjacency.setdefault(dl.b.node, set()).add(dl.a.node)
    tier = dict.fromkeys(cas, 0)
    frontier = list(cas)
    while frontier:
        nxt = []
        for n in frontier:
            for m in adjacency.get(n, ()):
                if m not in tier:
                    tier[m] = tier[n] + 1
                    nxt.append(m)
        frontier = nxt
    return tier
