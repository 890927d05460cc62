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
text (or bytes) in, frozen dataclasses out. The file is ~100 MB at Imbue scale and 230-270 MB for a
4,000-HCA SuperPOD, so a table shaped like one already read is not read line by line (see `_fast_table`).
"""

from __future__ import annotations

import itertools
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


def parse_lfts(text: str | bytes, source: str = "lfts") -> LftDump:
    """`text`: the dump as read (bytes spare a copy of a 270 MB file)."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if b"\x00" in data:
        no = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ParseError(source, no, "binary data (NUL byte): expected text output of an InfiniBand tool")
    parser = _Lines(source)
    if b"\r" in data:  # a terminal capture: every line through the line reader
        for no, line in enumerate(split_lines(data.decode("utf-8", "replace"), source), start=1):
            parser.feed(line, no)
        return parser.finish()
    starts = [0] if data.startswith(b"Unicast lids") else []
    at = data.find(b"\nUnicast lids")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\nUnicast lids", at + 1)
    no = 1
    if not starts or starts[0] > 0:
        no = parser.feed_text(data[: starts[0] if starts else len(data)], no)
    shapes: dict[int, list[_Shape]] = {}
    for k, begin in enumerate(starts):
        segment = data[begin: starts[k + 1] if k + 1 < len(starts) else len(data)]
        fast = _fast_table(segment, shapes, no, source) or _regular_table(segment, parser.destinations, no, source)
        if fast is not None:
            parser.close(no)
            parser.add(fast[0], no)
            no += fast[1]
            if fast[2]:
                _learn_shape(segment, shapes, True)
            continue
        no = parser.feed_text(segment, no)
        _learn_shape(segment, shapes, parser.last_clean)
    return parser.finish()


class _Lines:
    """The line-by-line reader: any table the fast path does not recognise, with exact warnings."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.tables: dict[str, SwitchLft] = {}
        self.destinations: dict[int, Destination] = {}
        self.warnings: list[str] = []
        self.current: _Table | None = None
        self.last_clean = False  # the last table read had only well-formed entries

    def close(self, no: int) -> None:
        if self.current is None:
            return
        table = self.current.freeze()
        self.current = None
        self.add(table, no)

    def add(self, table: SwitchLft, no: int) -> None:
        if table.guid in self.tables:
            raise ParseError(self.source, no, f"switch 0x{table.guid} has two tables (lines "
                             f"{self.tables[table.guid].line} and {table.line}): two dumps concatenated? pass one "
                             "dump per fabric")
        if not table.complete:
            self.warnings.append(f"{self.source}:{table.line}: the table of switch 0x{table.guid} is incomplete "
                                 f"({table.entries} entries read, no matching 'valid lids dumped' line): truncated "
                                 "dump")
        self.tables[table.guid] = table

    def feed_text(self, chunk: bytes, no: int) -> int:
        """Reads `chunk` (whole lines, the first numbered `no`); the number of the line after it."""
        lines = chunk.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines):
            self.feed(line, no + i)
        return no + len(lines)

    def feed(self, line: str, no: int) -> None:
        current, source = self.current, self.source
        if line.startswith("0x") and current is not None:
            self.last_clean &= _entry(current, line, self.destinations, source, no, self.warnings)
            return
        stripped = line.strip()
        if not stripped or stripped.startswith(_BOILERPLATE):
            return
        if stripped.startswith("Unicast lids"):
            self.close(no)
            self.current = _header(stripped, source, no)
            self.last_clean = True
            return
        m = _FOOTER.match(stripped)
        if m and current is not None:
            current.footer = int(m.group(1))
            self.close(no)
            return
        self.last_clean = False
        self.warnings.append(f"{source}:{no}: not a forwarding-table line, ignored: {printable(stripped)}")

    def finish(self) -> LftDump:
        self.close(0)
        if not self.tables:
            raise ParseError(self.source, None, "no forwarding table found: expected `dump_lfts` or `ibroute` "
                             "output ('Unicast lids [0x0-0x..] of switch ... guid 0x...')")
        return LftDump(self.source, self.tables, self.destinations, tuple(self.warnings))


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
           warnings: list[str]) -> bool:
    """Reads one entry line into `table`; False when it was malformed (and ignored)."""
    line = line.rstrip()
    # An entry cut short (truncated file) has lost its closing parenthesis: never read its port.
    if len(line) < 14 or line[6] != " " or line[10:13] != " : " or not line.endswith(")"):
        warnings.append(f"{source}:{no}: malformed forwarding entry ignored: {printable(line)}")
        return False
    try:
        lid, port = int(line[2:6], 16), int(line[7:10])
    except ValueError:
        warnings.append(f"{source}:{no}: malformed forwarding entry ignored: {printable(line)}")
        return False
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
    return True


# The fast path. A dump lists the same LIDs, with the same destinations, in every switch's table: the
# tables differ only in their header and in the 3 out-port digits of each entry. The first table of a
# shape is read line by line; a later table whose entries are byte for byte the same outside those digits
# (checked on the whole body as one big integer under a mask) takes its ports from the digits, converted in 16-bit
# lanes of one big integer. Anything else (another LID set, a malformed or cut line, a footer that does
# not match) goes through the line reader, with its warnings.

_BOILER_2, _BOILER_3 = b"  Lid  Out   Destination\n", b"       Port     Info \n"
_FOOTER_B = re.compile(rb"\n(\d+) valid lids dumped[ \t]*\n")
_ENTRY_B = re.compile(rb"0x([0-9a-fA-F]{4}) (\d{3}) : \([^\n]*\)[ \t]*\n")
_ENTRY_LINE = re.compile(rb"^0x([0-9a-fA-F]{4}) (\d{3}) : \([^\n]*\)[ \t]*\n", re.M)
_HUNDREDS = bytes.maketrans(b"012", bytes((0, 100, 200)))
_TENS = bytes.maketrans(b"0123456789", bytes(range(0, 100, 10)))
_UNITS = bytes.maketrans(b"0123456789", bytes(range(10)))


@dataclass(frozen=True)
class _Shape:
    value: int  # the entries as one big integer, port digits zeroed
    mask: int  # 0x00 under the port digits, 0xff elsewhere
    keep: int  # its complement: 0xff under the port digits
    runs: tuple[tuple[int, int, int], ...]  # (first LID, first entry, count) of consecutive LIDs
    top_lid: int
    entries: int


def _parts(segment: bytes) -> tuple[bytes, bytes, int, int] | None:
    """(header line, entry lines, footer count, lines after the footer) of a table laid out as dump_lfts
    lays it out; None for anything else."""
    head_end = segment.find(b"\n")
    if head_end < 0 or not segment.startswith(_BOILER_2 + _BOILER_3, head_end + 1):
        return None
    body_start = head_end + 1 + len(_BOILER_2) + len(_BOILER_3)
    at = segment.rfind(b" valid lids dumped")
    foot_start = segment.rfind(b"\n", 0, at) + 1
    foot = _FOOTER_B.match(segment, foot_start - 1) if foot_start > body_start else None
    if foot is None or segment[foot.end():].strip():
        return None
    return segment[:head_end], segment[body_start: foot_start], int(foot.group(1)), segment.count(b"\n", foot.end())


def _fast_table(segment: bytes, shapes: dict[int, list[_Shape]], no: int, source: str,
                ) -> tuple[SwitchLft, int, bool] | None:
    parts = _parts(segment)
    if parts is None:
        return None
    head, body, footer, after = parts
    value = int.from_bytes(body)
    shape = next((s for s in shapes.get(len(body), ()) if value & s.mask == s.value), None)
    if shape is None or footer != shape.entries:
        return None
    # the body with everything but the port digits zeroed, less its zero bytes: the digits, in order
    digits = (value & shape.keep).to_bytes(len(body)).translate(None, b"\0")
    if len(digits) != 3 * shape.entries or digits.translate(None, b"0123456789") or \
            digits[0::3].translate(None, b"012"):
        return None
    n = shape.entries
    lanes, total = bytearray(2 * n), 0
    for col, values in enumerate((_HUNDREDS, _TENS, _UNITS)):
        lanes[0::2] = digits[col::3].translate(values)
        total += int.from_bytes(lanes, "little")
    both = total.to_bytes(2 * n, "little")
    ports = both[0::2]
    if both[1::2].count(0) != n or NO_PORT in ports:
        return None
    table = _header(head.decode("utf-8", "replace").strip(), source, no)
    if shape.top_lid >= len(table.ports):
        return None
    for lid, first, count in shape.runs:
        table.ports[lid: lid + count] = ports[first: first + count]
    table.entries, table.footer = n, footer
    return table.freeze(), 4 + n + after, False  # header, 2 boilerplate lines, entries, footer


def _regular_table(segment: bytes, destinations: dict[int, Destination], no: int, source: str,
                   ) -> tuple[SwitchLft, int, bool] | None:
    """A table of another LID set (a switch the SM routes fewer LIDs from), every line a well-formed entry
    naming only destinations already read: its LIDs and ports by one regular expression over the table
    (under ftree every switch of a tier may route another set of switch LIDs: no shape repeats)."""
    parts = _parts(segment)
    if parts is None:
        return None
    head, body, footer, after = parts
    found = _ENTRY_LINE.findall(body)
    if len(found) != footer or body.count(b"\n") != footer:
        return None
    table = _header(head.decode("utf-8", "replace").strip(), source, no)
    ports = table.ports
    for lid_hex, port_text in found:
        lid, port = int(lid_hex, 16), int(port_text)
        if lid >= len(ports) or port >= NO_PORT or lid not in destinations:
            return None  # the line reader says where, or reads the new destination
        ports[lid] = port
    table.entries, table.footer = footer, footer
    return table.freeze(), 4 + footer + after, False  # its shape is learnt only by a table of the majority


def _learn_shape(segment: bytes, shapes: dict[int, list[_Shape]], clean: bool) -> None:
    """Remember the layout of a table read cleanly (no malformed line), for the tables after it."""
    parts = _parts(segment)
    if parts is None or not clean:
        return
    _head, body, footer, _after = parts
    found = list(_ENTRY_B.finditer(body))
    if len(found) != footer or sum(m.end() - m.start() for m in found) != len(body):
        return
    lids = [int(m.group(1), 16) for m in found]
    if any(b <= a for a, b in itertools.pairwise(lids)) or len(shapes.get(len(body), ())) >= 8:
        return
    mask = bytearray(b"\xff") * len(body)
    for m in found:
        mask[m.start(2): m.start(2) + 3] = b"\0\0\0"
    runs: list[tuple[int, int, int]] = []
    for i, lid in enumerate(lids):
        if runs and runs[-1][0] + runs[-1][2] == lid:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((lid, i, 1))
    whole = int.from_bytes(mask)
    keep = whole ^ ((1 << 8 * len(body)) - 1)
    shapes.setdefault(len(body), []).append(_Shape(int.from_bytes(body) & whole, whole, keep, tuple(runs), lids[-1],
                                                   footer))
