"""`ibnetdiscover` (default and `-p` ports report) output -> Topology.

Handles what real captures contain: tabs lost in a PuTTY log (`Switch41 "S-..."#`), CRLF, split NDR
ports (`2xNDR`), `lid 65535` (no SM yet), stderr lines mixed in (`src/query_smp.c:195; ...`), redacted
GUIDs, and a capture cut off mid-way (parsed as far as it goes, with a warning).
"""

from __future__ import annotations

import re

from fabric.errors import ParseError
from fabric.parsers.common import UnreadLines, norm_guid, nothing_read, printable, split_lines
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import End, Node, NodeType, Topology, TopologyBuilder

_TYPE = {"S": NodeType.SWITCH, "H": NodeType.CA, "R": NodeType.ROUTER}
_HEADER_TYPE = {"Switch": NodeType.SWITCH, "Ca": NodeType.CA, "Rt": NodeType.ROUTER}

_HEADER = re.compile(r'^(Switch|Ca|Rt)\s*(\d+)\s*"([SHR])-([^"]*)"\s*(?:#\s*"([^"]*)"(.*))?$')
_PORT = re.compile(r'^\[(\d+)\]\s*(?:\(([^)]*)\))?\s*"([SHR])-([^"]*)"\s*\[(\d+)\]\s*(?:\(([^)]*)\))?\s*(.*)$')
_KEYVAL = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)\s*=\s*(\S*)")
_KEYS = ("vendid", "devid", "sysimgguid", "switchguid", "caguid", "rtguid")
_LID = re.compile(r"\blid\s+(\d+)")
_RATE = re.compile(r"\blid\s+\d+\s+(\d+)x([A-Za-z0-9]+)")
_QUOTED = re.compile(r'"([^"]*)"')
_CAPTURE_START = "# Topology file:"
_DUPLICATE = re.compile(r"Duplicate (?:Port|Node)\b.*?guid (?:0x)?([0-9a-fA-F]+)")

EXPECTED_NODE = "a node line ('Switch <ports> \"S-<guid>\" # \"<description>\" ...' or 'Ca <ports> \"H-<guid>\" ...')"


_FAST_PORT = re.compile(
    r'^\[(\d+)\]\s*(?:\(([^)]*)\))?\s*"([SHR])-([^"]*)"\s*\[(\d+)\]\s*(?:\([^)]*\))?\s*'
    r'#\s*(?:lid\s+\d+\s+lmc\s+\d+\s+)?"([^"]*)"\s*lid\s+\d+\s+(\d+)x([A-Za-z0-9]+)\s*$'
)


class _Guids:
    """GUID spelling -> canonical key, cached (a capture names each GUID many times)."""

    def __init__(self, b: TopologyBuilder) -> None:
        self.cache: dict[str, str] = {}
        self.b = b
        self.redacted = False

    def key(self, raw: str, desc: str, line: int) -> str:
        hit = self.cache.get(raw)
        if hit is not None:
            return hit
        guid, ok = norm_guid(raw)
        if not ok:
            # A redacted GUID identifies nothing: key it by its description so that different
            # devices with the same redaction stay apart.
            if not self.redacted:
                self.redacted = True
                self.b.warn(line, f"GUID '{raw}' is not hexadecimal (redacted capture?): such nodes are keyed "
                            "by their description")
            return f"{guid}|{desc.strip()}"
        self.cache[raw] = guid
        return guid


def parse_ibnetdiscover(text: str, source: str = "ibnetdiscover") -> Topology:
    lines = split_lines(text, source)
    b = TopologyBuilder(source)
    guids = _Guids(b)
    current: Node | None = None
    unread = UnreadLines(b, "ibnetdiscover output")
    seen_any_line = False
    fast = _FAST_PORT.match
    widths: dict[str, str | None] = {}
    speeds: dict[str, str | None] = {}
    peers_seen: set[str] = set()
    for no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            current = None
            continue
        seen_any_line = True
        c = stripped[0]
        if c == "[":
            if current is None:
                b.warn(no, f"port line outside a node block ignored: {printable(stripped)}")
                continue
            m = fast(stripped)
            if m is None:
                _port_line(b, guids, current, stripped, no)
                continue
            port_s, local_pg, prefix, raw_peer, peer_port, desc, w, s = m.groups()
            pnum = int(port_s)
            if local_pg:
                b.port_guid(norm_guid(local_pg)[0], current.guid)
            if current.nports is not None and pnum > current.nports:
                b.warn(no, f"port {pnum} is beyond the {current.nports} ports declared for {current.guid}")
            peer = guids.key(raw_peer, desc, no)
            if w not in widths:
                widths[w] = normalise_width(w)
            if s not in speeds:
                speeds[s] = normalise_speed(s)
            if peer not in peers_seen:
                peers_seen.add(peer)
                b.note_peer(peer, _TYPE[prefix], desc.strip())
            b.add_port(End(current.guid, pnum), End(peer, int(peer_port)), widths[w], speeds[s], no)
            continue
        current = _other_line(b, guids, unread, source, stripped, no, current)
    if not b.has_nodes():
        # only comments and key=value lines: show the first line
        first = (unread.first or (1, lines[0] if lines else "")) if seen_any_line else None
        raise nothing_read(source, "ibnetdiscover", EXPECTED_NODE, first)
    return b.build()


def _other_line(b: TopologyBuilder, guids: _Guids, unread: UnreadLines, source: str, stripped: str, no: int,
                current: Node | None) -> Node | None:
    """A line that is not a port line: a comment, a key=value line, a node header (the node it opens is
    returned), a duplicate-GUID report, or a line nobody reads. Returns the node block now open."""
    if stripped[0] == "#":
        if stripped.startswith(_CAPTURE_START) and b.has_nodes():
            raise ParseError(source, no, "a second ibnetdiscover capture starts here (two captures "
                             "concatenated?): pass each capture as its own file")
        return current
    if stripped.startswith(_KEYS) and _KEYVAL.match(stripped):
        return current
    m = _HEADER.match(stripped)
    if m:
        return _node(b, guids, m, no)
    dup = _DUPLICATE.search(stripped)
    if dup:
        b.reported_duplicate(norm_guid(dup.group(1))[0], no)
    else:
        unread.add(no, stripped)
    return current


def _node(b: TopologyBuilder, guids: _Guids, m: re.Match[str], no: int) -> Node:
    kind, nports, prefix, raw_guid, desc, rest = m.groups()
    guid = guids.key(raw_guid, desc or "", no)
    lid_m = _LID.search(rest or "")
    node = Node(
        guid=guid,
        type=_HEADER_TYPE[kind],
        description=(desc or "").strip(),
        nports=int(nports),
        lid=int(lid_m.group(1)) if lid_m else None,
        line=no,
    )
    if _TYPE[prefix] is not node.type:
        b.warn(no, f"{kind} line with a '{prefix}-' GUID")
    b.add_node(node)
    return node


def _port_line(b: TopologyBuilder, guids: _Guids, current: Node, line: str, no: int) -> None:
    m = _PORT.match(line)
    if not m:
        b.warn(no, "expected a port line '[<port>] \"S-|H-<guid>\"[<peer port>] # ...', "
               f"ignored: {printable(line)}")
        return
    port, local_pg, prefix, raw_peer, peer_port, _peer_pg, rest = m.groups()
    pnum = int(port)
    if local_pg:
        b.port_guid(norm_guid(local_pg)[0], current.guid)
    if current.nports is not None and pnum > current.nports:
        b.warn(no, f"port {pnum} is beyond the {current.nports} ports declared for {current.guid}")
    desc_m = _QUOTED.search(rest)
    desc = desc_m.group(1).strip() if desc_m else ""
    peer_guid = guids.key(raw_peer, desc, no)
    rates = _RATE.findall(rest)
    width = speed = None
    if rates:
        w, s = rates[-1]
        width, speed = normalise_width(w), normalise_speed(s)
    elif "#" in rest:
        b.warn(no, "expected a port line ending in 'lid <n> <width>x<speed>' (truncated?), link kept without "
               f"its rate: {printable(line)}")
    b.note_peer(peer_guid, _TYPE[prefix], desc)
    b.add_port(End(current.guid, pnum), End(peer_guid, int(peer_port)), width, speed, no)


_PORTS_LINE = re.compile(
    r"^(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]+)\s+(\d+)x\s+(\w+)\s*"
    r"(?:-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)|'(.*)')\s*$"
)
_PTYPE = {"SW": NodeType.SWITCH, "CA": NodeType.CA, "RT": NodeType.ROUTER}


def parse_ibnetdiscover_ports(text: str, source: str = "ibnetdiscover -p") -> Topology:
    """`ibnetdiscover -p`: one line per port; CA GUIDs there are port GUIDs."""
    lines = split_lines(text, source)
    b = TopologyBuilder(source)
    declared: set[str] = set()
    unread = UnreadLines(b, "an 'ibnetdiscover -p' line")
    for no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _PORTS_LINE.match(stripped)
        if not m:
            unread.add(no, stripped)
            continue
        t, lid, port, guid_raw, w, s, pt, plid, pport, pguid_raw, desc, pdesc, lone_desc = m.groups()
        guid, _ = norm_guid(guid_raw)
        if guid not in declared:
            declared.add(guid)
            b.add_node(Node(guid, _PTYPE[t], (desc if pt else lone_desc).strip(), lid=int(lid), line=no))
        if pt is None:
            continue
        peer, _ = norm_guid(pguid_raw)
        b.note_peer(peer, _PTYPE[pt], pdesc.strip(), lid=int(plid))
        b.add_port(End(guid, int(port)), End(peer, int(pport)), normalise_width(w), normalise_speed(s), no)
    if not b.has_nodes():
        raise nothing_read(source, "'ibnetdiscover -p'", "a port line 'SW <lid> <port> 0x<guid> 4x HDR - CA ...'",
                           unread.first)
    return b.build()
