"""`iblinkinfo` output (default block form and `-l` line form) -> Topology.

The default form names a peer only by LID, so peers are resolved through the LIDs the local lines
declare; a peer whose LID is unknown or ambiguous (`lid 65535` before an SM ran, `iblinkinfo -S` of a
single switch) becomes a placeholder node `lid-<n>` with a warning. Ports that are not `LinkUp`
(`Down/ Polling`, `Down/ Disabled`) are recorded as down ports; the `( Could be 53.125 Gbps)`
annotation is kept on the link.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabric.parsers.common import UnreadLines, norm_guid, nothing_read, printable, split_lines
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import End, Node, NodeType, Topology, TopologyBuilder

_CA_HDR = re.compile(r"^CA:\s*(.*?):?\s*$")
_SW_HDR = re.compile(r"^Switch:\s*0x([0-9a-fA-F]+)\s*(.*?):?\s*$")
_LOCAL = re.compile(r'^(?:0x([0-9a-fA-F]+)\s+(?:"\s*(.*?)"\s+)?)?(\d+)\s+(\d+)\[[^\]]*\]\s*==\((.*?)\)==>\s*(.*)$')
_STATE = re.compile(r"^\s*(?:(\d+)X\s+([\d.]+)\s*Gbps\s+)?([A-Za-z]+)/\s*([A-Za-z]+)\s*$")
_PEER = re.compile(r'^(?:0x([0-9a-fA-F]+)\s+)?(\d+)?\s*(\d+)?\[[^\]]*\]\s*"(.*)"\s*\((.*)\)\s*$')
_COULD_SPEED = re.compile(r"Could be\s+([\d.]+)\s*Gbps")


@dataclass(slots=True)
class _Pending:
    local: End
    peer_guid: str | None
    peer_lid: int
    peer_port: int
    peer_desc: str
    width: str | None
    speed: str | None
    could_be: str | None
    line: int


class _Reader:
    """One pass over iblinkinfo's lines: headers set the block, port lines declare nodes and queue links."""

    def __init__(self, source: str) -> None:
        self.b = TopologyBuilder(source)
        self.lid_owner: dict[int, set[str]] = {}
        self.declared: dict[str, tuple[NodeType | None, str, int]] = {}
        self.max_port: dict[str, int] = {}
        self.pending: list[_Pending] = []
        self.block: tuple[NodeType, str | None, str] | None = None
        self.unread = UnreadLines(self.b, "iblinkinfo output")

    def line(self, no: int, stripped: str) -> None:
        m = _SW_HDR.match(stripped)
        if m:
            self.block = (NodeType.SWITCH, norm_guid(m.group(1))[0], m.group(2).strip())
            return
        m = _CA_HDR.match(stripped)
        if m:
            self.block = (NodeType.CA, None, m.group(1).strip())
            return
        m = _LOCAL.match(stripped)
        if not m:
            self.unread.add(no, stripped)
            return
        raw_guid, line_desc, lid_s, port_s, state_s, peer_s = m.groups()
        guid = self._guid(no, stripped, raw_guid)
        if guid is None:
            return
        self._declare(no, guid, line_desc, int(lid_s), int(port_s))
        st = _STATE.match(state_s)
        if not st:
            self.b.warn(no, f"expected a link state like '4X 53.125 Gbps Active/ LinkUp' or 'Down/ Polling', "
                        f"ignored: {printable(state_s)}")
            return
        w, gbps, logical, physical = st.groups()
        local = End(guid, int(port_s))
        if physical != "LinkUp":
            self.b.add_down(local, f"{logical}/{physical}", no)
            return
        self._peer(no, local, peer_s, w, gbps)

    def _guid(self, no: int, stripped: str, raw_guid: str | None) -> str | None:
        if raw_guid is not None:
            return norm_guid(raw_guid)[0]
        if self.block is not None and self.block[1] is not None:
            return self.block[1]
        self.b.warn(no, f"port line without a GUID or a 'Switch: 0x<guid>' header, ignored: {printable(stripped)}")
        return None

    def _declare(self, no: int, guid: str, line_desc: str | None, lid: int, port: int) -> None:
        if line_desc is not None:
            ntype: NodeType | None = None
            desc = line_desc.strip()
        elif self.block is not None:
            ntype, desc = self.block[0], self.block[2]
        else:
            ntype, desc = None, ""
        self.declared.setdefault(guid, (ntype, desc, no))
        self.max_port[guid] = max(self.max_port.get(guid, 0), port)
        self.lid_owner.setdefault(lid, set()).add(guid)

    def _peer(self, no: int, local: End, peer_s: str, w: str | None, gbps: str | None) -> None:
        p = _PEER.match(peer_s.strip())
        if not p or p.group(3) is None:
            self.b.warn(no, f"expected the peer '<lid> <port>[ ] \"<description>\" ( )', ignored: {printable(peer_s)}")
            return
        pguid_raw, plid, pport, pdesc, annot = p.groups()
        could = _COULD_SPEED.search(annot)
        peer_guid = norm_guid(pguid_raw)[0] if pguid_raw else None
        self.pending.append(_Pending(
            local=local, peer_guid=peer_guid, peer_lid=int(plid) if plid else -1, peer_port=int(pport),
            peer_desc=pdesc.strip(), width=normalise_width(w) if w else None,
            speed=normalise_speed(gbps) if gbps else None,
            could_be=normalise_speed(could.group(1)) if could else None, line=no))
        self.max_port.setdefault(peer_guid or "", 0)
        if peer_guid:
            self.max_port[peer_guid] = max(self.max_port[peer_guid], int(pport))

    def _guess(self, guid: str) -> NodeType:
        # `-l` lines do not say what a node is; only switches have ports beyond 2.
        return NodeType.SWITCH if self.max_port.get(guid, 0) > 2 else NodeType.CA

    def topology(self) -> Topology:
        b = self.b
        for guid, (ntype, desc, no) in self.declared.items():
            b.add_node(Node(guid=guid, type=ntype or self._guess(guid), description=desc, line=no))
        for pend in self.pending:
            peer_guid = pend.peer_guid
            if peer_guid is None:
                owners = self.lid_owner.get(pend.peer_lid, set())
                if len(owners) == 1:
                    peer_guid = next(iter(owners))
                else:
                    peer_guid = f"lid-{pend.peer_lid}"
                    why = "is not in this output" if not owners else f"is used by {len(owners)} nodes"
                    b.warn(pend.line, f"peer LID {pend.peer_lid} {why}: kept as placeholder '{peer_guid}'")
            if peer_guid not in self.declared:
                ptype = NodeType.SWITCH if pend.peer_port > 2 else NodeType.CA
                b.note_peer(peer_guid, ptype, pend.peer_desc, lid=pend.peer_lid if pend.peer_lid >= 0 else None)
            b.add_port(pend.local, End(peer_guid, pend.peer_port), pend.width, pend.speed, pend.line, pend.could_be)
        return b.build()


def parse_iblinkinfo(text: str, source: str = "iblinkinfo") -> Topology:
    reader = _Reader(source)
    for no, line in enumerate(split_lines(text, source), start=1):
        stripped = line.strip()
        if stripped:
            reader.line(no, stripped)
    if not reader.declared:
        raise nothing_read(source, "iblinkinfo", "iblinkinfo output ('CA: <desc>:', 'Switch: 0x<guid> <desc>:' or "
                           "'<lid> <port>[ ] ==( 4X 53.125 Gbps Active/ LinkUp)==> ...')", reader.unread.first)
    return reader.topology()
