"""Unicast linear forwarding tables as `dump_lfts` (dump_lfts.sh) or concatenated `ibroute` print them.

One table per switch::

    Unicast lids [0x0-0x8d] of switch Lid 2 guid 0x0c42a10300000010 (Quantum Mellanox Technologies):
      Lid  Out   Destination
           Port     Info
    0x0001 034 : (Switch portguid 0x0c42a10300000000: 'Quantum Mellanox Technologies')
    0x000d 021 : (Channel Adapter portguid 0xb8599f0300000001: 'gpu-r1-01 mlx5_0')
    ...
    141 valid lids dumped

(`dump_lfts` names the switch `DR path slid 0; dlid 0; 0,21,36` instead of `Lid 2`.) A table is
`complete` only when its `N valid lids dumped` line came and N matches the entries read; a dump cut
off mid-table leaves that table incomplete, and an entry line cut mid-way (no closing parenthesis) is
never read, so a truncated dump loses entries but never yields a wrong out-port. The parser is pure:
text in, frozen dataclasses out. The file is ~100 MB at Imbue scale, so entry lines are sliced, not
matched with a regular expression.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabric.errors import ParseError
from fabric.parsers.common import printable, split_lines

NO_PORT = 255  # the out-port IB itself uses for "no route"

_HEADER = re.compile(r"^Unicast lids \[0x([0-9a-fA-F]+)-0x([0-9a-fA-F]+)\] of switch (.*?)\s*"
                     r"guid 0x([0-9a-fA-F]+) \((.*)\):\s*$")
_FOOTER = re.compile(r"^(\d+) valid lids dumped\s*$")
_ENTRY = re.compile(r"^0x([0-9a-fA-F]{4}) (\d{3}) : \((Switch|Channel Adapter|Router) portguid "
                    r"0x([0-9a-fA-F]+): '(.*)'\)$")
_BOILERPLATE = ("Lid  Out", "Port     Info", "*** WARNING ***", "ibwarn:")


@dataclass(frozen=True, slots=True)
class Destination:
    """What a LID is, as the dump says: `switch`, `ca` or `router`, its port GUID and description."""

    kind: str
    port_guid: str
    description: str


@dataclass(frozen=True, slots=True)
class SwitchLft:
    guid: str
    description: str
    where: str  # `Lid 2` (ibroute) or the directed route (dump_lfts)
    out_ports: bytes = field(repr=False)  # index: LID; NO_PORT where the table has no entry
    entries: int
    complete: bool
    line: int

    def out_port(self, lid: int) -> int | None:
        if lid >= len(self.out_ports):
            return None
        port = self.out_ports[lid]
        return None if port == NO_PORT else port


@dataclass(frozen=True)
class LftDump:
    source: str
    switches: Mapping[str, SwitchLft]  # by switch node GUID
    destinations: Mapping[int, Destination]  # by LID, from the first table that names it
    warnings: tuple[str, ...] = ()

    @property
    def truncated(self) -> tuple[SwitchLft, ...]:
        return tuple(t for t in self.switches.values() if not t.complete)


class _Table:
    def __init__(self, guid: str, description: str, where: str, top: int, line: int) -> None:
        self.guid, self.description, self.where, self.line = guid, description, where, line
        self.ports = bytearray([NO_PORT]) * (top + 1)
        self.entries = 0
        self.footer: int | None = None

    def freeze(self) -> SwitchLft:
        complete = self.footer is not None and self.footer == self.entries
        return SwitchLft(self.guid, self.description, self.where, bytes(self.ports), self.entries, complete,
                         self.line)


def parse_lfts(text: str, source: str = "lfts") -> LftDump:
    lines = split_lines(text, source)
    tables: dict[str, SwitchLft] = {}
    destinations: dict[int, Destination] = {}
    warnings: list[str] = []
    current: _Table | None = None

    def close(no: int) -> None:
        nonlocal current
        if current is None:
            return
        table = current.freeze()
        current = None
        if table.guid in tables:
            raise ParseError(source, no, f"switch 0x{table.guid} has two tables (lines {tables[table.guid].line} "
                             f"and {table.line}): two dumps concatenated? pass one dump per fabric")
        if not table.complete:
            warnings.append(f"{source}:{table.line}: the table of switch 0x{table.guid} is incomplete "
                            f"({table.entries} entries read, no matching 'valid lids dumped' line): truncated dump")
        tables[table.guid] = table

    for no, line in enumerate(lines, start=1):
        if line.startswith("0x") and current is not None:
            _entry(current, line, destinations, source, no, warnings)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(_BOILERPLATE):
            continue
        if stripped.startswith("Unicast lids"):
            close(no)
            current = _header(stripped, source, no)
            continue
        m = _FOOTER.match(stripped)
        if m and current is not None:
            current.footer = int(m.group(1))
            close(no)
            continue
        warnings.append(f"{source}:{no}: not a forwarding-table line, ignored: {printable(stripped)}")
    close(len(lines))
    if not tables:
        raise ParseError(source, None, "no forwarding table found: expected `dump_lfts` or `ibroute` output "
                         "('Unicast lids [0x0-0x..] of switch ... guid 0x...')")
    return LftDump(source, tables, destinations, tuple(warnings))


def _header(line: str, source: str, no: int) -> _Table:
    m = _HEADER.match(line)
    if m is None:
        raise ParseError(source, no, "expected 'Unicast lids [0x<first>-0x<last>] of switch <where> guid 0x<guid> "
                         f"(<description>):', found: {printable(line)}")
    _first, last, where, guid, desc = m.groups()
    top = int(last, 16)
    if top > 0xBFFF:
        raise ParseError(source, no, f"unicast LID range ends at 0x{last}, beyond the unicast LIDs (0xbfff)")
    return _Table(guid.lower().zfill(16), desc, where.strip(), top, no)


def _entry(table: _Table, line: str, destinations: dict[int, Destination], source: str, no: int,
           warnings: list[str]) -> None:
    line = line.rstrip()
    # An entry cut short (truncated file) has lost its closing parenthesis: never read its port.
    if len(line) < 14 or line[6] != " " or line[10:13] != " : " or not line.endswith(")"):
        warnings.append(f"{source}:{no}: malformed forwarding entry ignored: {printable(line)}")
        return
    try:
        lid, port = int(line[2:6], 16), int(line[7:10])
    except ValueError:
        warnings.append(f"{source}:{no}: malformed forwarding entry ignored: {printable(line)}")
        return
    if lid >= len(table.ports) or port >= NO_PORT:
        raise ParseError(source, no, f"LID 0x{lid:04x} -> port {port} is outside the table's declared range")
    table.ports[lid] = port
    table.entries += 1
    if lid not in destinations:
        m = _ENTRY.match(line)
        if m is None:
            raise ParseError(source, no, f"expected '0x<lid> <port> : (<type> portguid 0x<guid>: '<description>')', "
                             f"found: {printable(line)}")
        kind = {"Switch": "switch", "Channel Adapter": "ca", "Router": "router"}[m.group(3)]
        destinations[lid] = Destination(kind, m.group(4).lower().zfill(16), m.group(5))
