"""Import the cabling spreadsheet a datacenter partner sends (.xlsx workbook or CSV) as a design.

The sheet is read by `provision.site.sheets` (header row found under any title block, merged cells filled, blank
rows skipped, a `--columns` mapping for the partner's own headers); every row that cannot be understood
is reported with its sheet and row, and the import then fails: nothing is dropped silently.

Cabling sheet: one row per cable; header names are matched loosely (case, spaces, punctuation):
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

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fabric.design import Design, DesignLink, DesignNode, Location, Port, build_design
from fabric.errors import DesignError
from fabric.speeds import SPEED_RANK, WIDTH_LANES, normalise_speed, normalise_width
from fabric.topology import NodeType
from provision.site.sheets import SheetError, SheetRow, csv_grid, read_csv_text, read_table

CABLING_FIELDS = ("a", "a_port", "b", "b_port")
CABLING_ALIASES = {
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


@contextmanager
def _sheet_problems_fail_the_design() -> Iterator[None]:
    """A sheet that cannot be read fails the import as any other design problem does (`DesignError`)."""
    try:
        yield
    except SheetError as e:
        raise DesignError(e.path, e.problems) from None


def _rows(text: str, source: str) -> list[dict[str, str]]:
    """The switch list's rows by lower-case header."""
    with _sheet_problems_fail_the_design():
        grid = csv_grid(text.encode(), source)
    header = [h.lstrip("#").strip().lower() for h in grid[0][1]]
    return [dict(zip(header, cells, strict=False)) for _, cells in grid[1:] if any(cells)]


def _norm_end(name: str) -> str:
    name = name.strip()
    if " " in name:
        host, hca = name.split(None, 1)
        return f"{host}/{hca.strip()}"
    return name


def _row_list(wheres: list[str]) -> str:
    """'row 2' / 'rows 2, 3, 4' (CSV) or "sheet 'A' row 2, sheet 'A' row 3" (workbooks), five at most."""
    if all(w.startswith("row ") for w in wheres):
        numbers = [w[4:] for w in wheres]
        text = f"row{'s' if len(numbers) > 1 else ''} {', '.join(numbers[:5])}"
    else:
        text = ", ".join(wheres[:5])
    return text + (f" and {len(wheres) - 5} more" if len(wheres) > 5 else "")


def _port_number(text: str, end: str) -> int:
    """A port number: digits, or the last digits of a name like 'Port 12' / 'swp12'; an HCA's blank port is 1."""
    if not text and "/" in end:
        return 1
    m = re.fullmatch(r"\D{0,12}?(\d{1,5})", text.strip())
    if m is None:
        raise ValueError(f"port {text!r} is not a number")
    return int(m.group(1))


def parse_cabling_csv(text: str, switches_csv: str | None = None, source: str = "cabling.csv",
                      name: str = "fabric", width: str | None = None, speed: str | None = None) -> Design:
    """`width`/`speed`: the expected rate of rows that do not give their own (None: every row must)."""
    with _sheet_problems_fail_the_design():
        rows = read_csv_text(text, CABLING_ALIASES, CABLING_FIELDS, source).rows
    return design_from_rows(rows, switches_csv, source, name, width, speed)


def import_cabling_sheet(path: Path, switches_csv: str | None, name: str, width: str | None, speed: str | None,
                         columns: dict[str, str] | None = None, sheet: str | None = None) -> Design:
    """A design from a partner's workbook (.xlsx, every sheet or `sheet`) or CSV, with its headers mapped."""
    with _sheet_problems_fail_the_design():
        table = read_table(path, CABLING_ALIASES, CABLING_FIELDS, columns, sheet)
    return design_from_rows(table.rows, switches_csv, str(path), name, width, speed)


def design_from_rows(rows: list[SheetRow], switches_csv: str | None, source: str, name: str,
                     width: str | None, speed: str | None) -> Design:
    width, speed = _importer_rate(width, speed, source)
    if not rows:
        raise DesignError(source, ["no rows after the header"])
    links, ends, max_port = _cable_links(rows, width, speed, source)
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


def _cable_links(rows: list[SheetRow], width: str | None, speed: str | None,
                 source: str) -> tuple[list[DesignLink], set[str], dict[str, int]]:
    """One link per row (numbered by its line), the devices cabled and the highest port seen on each."""
    problems: list[str] = []
    links: list[DesignLink] = []
    ends: set[str] = set()
    max_port: dict[str, int] = {}
    unrated: dict[str, list[str]] = {"width": [], "speed": []}
    for row in rows:
        r, i, where = row.fields, row.row, row.where()
        try:
            a, b = _norm_end(r["a"]), _norm_end(r["b"])
            ap, bp = _port_number(r["a_port"], a), _port_number(r["b_port"], b)
            if not a or not b:
                raise ValueError("a device is blank")
        except ValueError as e:
            problems.append(f"{where}: needs two devices and two port numbers ({e}), got {list(row.raw)}")
            continue
        lw = normalise_width(r["width"]) if r.get("width") else width
        ls = normalise_speed(r["speed"]) if r.get("speed") else speed
        if (r.get("width") and lw is None) or (r.get("speed") and ls is None):
            problems.append(f"{where}: unknown width/speed {r.get('width')!r}/{r.get('speed')!r}")
            continue
        for what, value in (("width", lw), ("speed", ls)):
            if value is None:
                unrated[what].append(where)
        if lw is None or ls is None:
            continue
        links.append(DesignLink(Port(a, ap), Port(b, bp), lw, ls, r.get("cable") or None, number=i))
        for n, p in ((a, ap), (b, bp)):
            ends.add(n)
            max_port[n] = max(max_port.get(n, 0), p)
    missing = [what for what, rows in unrated.items() if rows]
    if missing:
        unrated_rows = list(dict.fromkeys(w for what in missing for w in unrated[what]))
        example = " ".join(_EXAMPLE[what] for what in missing)
        problems.insert(0, f"no expected {' or '.join(missing)} for {_row_list(unrated_rows)}: give "
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
