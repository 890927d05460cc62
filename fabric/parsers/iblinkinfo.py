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


def parse_iblinkinfo(text: str, source: str = "iblinkinfo") -> Topology:
    lines = split_lines(text, source)
    b = TopologyBuilder(source)
    lid_owner: dict[int, set[str]] = {}
    declared: dict[str, tuple[NodeType | None, str, int]] = {}
    max_port: dict[str, int] = {}
    pending: list[_Pending] = []
    block: tuple[NodeType, str | None, str] | None = None
    unread = UnreadLines(b, "iblinkinfo output")
    for no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _SW_HDR.match(stripped)
        if m:
            guid, _ = norm_guid(m.group(1))
            block = (NodeType.SWITCH, guid, m.group(2).strip())
            continue
        m = _CA_HDR.match(stripped)
        if m:
            block = (NodeType.CA, None, m.group(1).strip())
            continue
        m = _LOCAL.match(stripped)
        if not m:
            unread.add(no, stripped)
            continue
        raw_guid, line_desc, lid_s, port_s, state_s, peer_s = m.groups()
        if raw_guid is not None:
            guid, _ = norm_guid(raw_guid)
        elif block is not None and block[1] is not None:
            guid = block[1]
        else:
            b.warn(no, f"port line without a GUID or a 'Switch: 0x<guid>' header, ignored: {printable(stripped)}")
            continue
        if line_desc is not None:
            ntype: NodeType | None = None
            desc = line_desc.strip()
        elif block is not None:
            ntype, desc = block[0], block[2]
        else:
            ntype, desc = None, ""
        lid, port = int(lid_s), int(port_s)
        declared.setdefault(guid, (ntype, desc, no))
        max_port[guid] = max(max_port.get(guid, 0), port)
        lid_owner.setdefault(lid, set()).add(guid)
        st = _STATE.match(state_s)
        if not st:
            b.warn(no, f"expected a link state like '4X 53.125 Gbps Active/ LinkUp' or 'Down/ Polling', "
                   f"ignored: {printable(state_s)}")
            continue
        w, gbps, logical, physical = st.groups()
        local = End(guid, port)
        if physical != "LinkUp":
            b.add_down(local, f"{logical}/{physical}", no)
            continue
        p = _PEER.match(peer_s.strip())
        if not p or p.group(3) is None:
            b.warn(no, f"expected the peer '<lid> <port>[ ] \"<description>\" ( )', ignored: {printable(peer_s)}")
            continue
        pguid_raw, plid, pport, pdesc, annot = p.groups()
        could = _COULD_SPEED.search(annot)
        could_be = None
        if could:
            could_be = normalise_speed(could.group(1))
        pending.append(
            _Pending(
                local=local,
                peer_guid=norm_guid(pguid_raw)[0] if pguid_raw else None,
                peer_lid=int(plid) if plid else -1,
                peer_port=int(pport),
                peer_desc=pdesc.strip(),
                width=normalise_width(w) if w else None,
                speed=normalise_speed(gbps) if gbps else None,
                could_be=could_be,
                line=no,
            )
        )
        max_port.setdefault(pending[-1].peer_guid or "", 0)
        if pending[-1].peer_guid:
            max_port[pending[-1].peer_guid] = max(max_port[pending[-1].peer_guid], int(pport))
    if not declared:
        raise nothing_read(source, "iblinkinfo", "iblinkinfo output ('CA: <desc>:', 'Switch: 0x<guid> <desc>:' or "
                           "'<lid> <port>[ ] ==( 4X 53.125 Gbps Active/ LinkUp)==> ...')", unread.first)

    def guess(guid: str) -> NodeType:
        # `-l` lines do not say what a node is; only switches have ports beyond 2.
        return NodeType.SWITCH if max_port.get(guid, 0) > 2 else NodeType.CA

    for guid, (ntype, desc, no) in declared.items():
        b.add_node(Node(guid=guid, type=ntype or guess(guid), description=desc, line=no))
    for pend in pending:
        peer_guid = pend.peer_guid
        if peer_guid is None:
            owners = lid_owner.get(pend.peer_lid, set())
            if len(owners) == 1:
                peer_guid = next(iter(owners))
            else:
                peer_guid = f"lid-{pend.peer_lid}"
                why = "is not in this output" if not owners else f"is used by {len(owners)} nodes"
                b.warn(pend.line, f"peer LID {pend.peer_lid} {why}: kept as placeholder '{peer_guid}'")
        if peer_guid not in declared:
            ptype = NodeType.SWITCH if pend.peer_port > 2 else NodeType.CA
            b.note_peer(peer_guid, ptype, pend.peer_desc, lid=pend.peer_lid if pend.peer_lid >= 0 else None)
        b.add_port(pend.local, End(peer_guid, pend.peer_port), pend.width, pend.speed, pend.line, pend.could_be)
    return b.build()
