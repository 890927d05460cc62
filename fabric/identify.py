"""Map discovered nodes (GUIDs) to design names, and write the OpenSM node-name-map that renames switches.

Order of evidence: a GUID recorded in the design; the node description (an HCA says `<host> <hca>`,
a renamed switch `MF0;<name>:<model>/U1` or just `<name>`); then, for switches still unnamed (out of the
box every Quantum says "Quantum Mellanox Technologies"), who is plugged into them: a leaf is the switch
its designed HCAs hang off, a spine the switch its designed leaves' uplinks reach, and so on up, each
neighbour voting for the design switch at the far end of its own designed link. Last, an HCA whose
description names nothing is placed by the designed port it is plugged into (reported as such).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from fabric.design import Design, Port
from fabric.topology import End, NodeType, Topology

_MF0 = re.compile(r"^MF0;([^:]+):")


class Placement(NamedTuple):
    guid: str
    name: str
    how: str  # guid | description | neighbours | position


@dataclass(frozen=True, slots=True)
class Unplaced:
    guid: str
    type: NodeType
    description: str
    reason: str


@dataclass(frozen=True)
class Identification:
    by_guid: Mapping[str, Placement]
    by_name: Mapping[str, str]
    unplaced: tuple[Unplaced, ...]
    ignored: tuple[str, ...]
    notes: tuple[str, ...]

    def name(self, guid: str) -> str | None:
        p = self.by_guid.get(guid)
        return p.name if p else None

    def node_name_map(self, design: Design) -> str:
        """OpenSM/ibnetdiscover `--node-name-map` text: `0x<guid> "<name>"` for every placed switch."""
        lines = ["# node-name-map written by `fabric identify`: switch GUID -> physical location name"]
        for guid, p in sorted(self.by_guid.items(), key=lambda kv: kv[1].name):
            node = design.nodes.get(p.name)
            if node is not None and node.type is NodeType.SWITCH:
                lines.append(f'0x{guid} "{p.name}"')
        return "\n".join(lines) + "\n"


def switch_name_from_description(desc: str) -> str:
    m = _MF0.match(desc)
    return (m.group(1) if m else desc).strip()


def ca_name_from_description(desc: str) -> str | None:
    tokens = desc.split()
    if len(tokens) < 2:
        return None
    return f"{tokens[0].split('.')[0]}/{tokens[-1]}"


def identify(design: Design, top: Topology) -> Identification:
    return _Identifier(design, top).run()


class _Identifier:
    def __init__(self, design: Design, top: Topology) -> None:
        self.design = design
        self.top = top
        self.placed: dict[str, Placement] = {}
        self.taken: dict[str, str] = {}
        self.notes: list[str] = []
        self.reasons: dict[str, str] = {}
        self.ignored = [g for g, n in top.nodes.items() if n.is_aggregation_node]
        self.ignored_set = set(self.ignored)
        self.adjacency = top.adjacency

    def place(self, guid: str, name: str, how: str) -> None:
        self.placed[guid] = Placement(guid, name, how)
        self.taken[name] = guid

    def run(self) -> Identification:
        self._by_guid()
        self._by_description()
        self._infer_switches()
        self._place_cas_by_position()
        unplaced = []
        for guid, node in self.top.nodes.items():
            if guid in self.placed or guid in self.ignored_set:
                continue
            reason = self.reasons.get(guid) or self._why_unplaced(guid)
            unplaced.append(Unplaced(guid, node.type, node.description, reason))
        return Identification(by_guid=self.placed, by_name=self.taken, unplaced=tuple(unplaced),
                              ignored=tuple(self.ignored), notes=tuple(self.notes))

    def _by_guid(self) -> None:
        design_guids = {n.guid: n.name for n in self.design.nodes.values() if n.guid}
        for guid in self.top.nodes:
            name = design_guids.get(guid)
            if name is not None and name not in self.taken:
                self.place(guid, name, "guid")

    def _by_description(self) -> None:
        lower_names = {name.lower(): name for name in self.design.nodes}
        for guid, node in self.top.nodes.items():
            if guid in self.placed or guid in self.ignored_set:
                continue
            if node.type is NodeType.SWITCH:
                cand = switch_name_from_description(node.description)
            else:
                cand = ca_name_from_description(node.description) or node.description
            name = lower_names.get(cand.lower())
            if name is None:
                continue
            dnode = self.design.nodes[name]
            if (dnode.type is NodeType.SWITCH) != (node.type is NodeType.SWITCH):
                self.reasons[guid] = f"its description names {name}, which the design declares as a {dnode.type}"
                continue
            if name in self.taken:
                self.reasons[guid] = f"its description names {name}, but GUID {self.taken[name]} already reports it"
                self.notes.append(f"two nodes describe themselves as {name}: {self.taken[name]} and {guid}")
                continue
            self.place(guid, name, "description")

    def _far_end(self, peer: End) -> Port | None:
        """The design's far end of the designed link at a placed neighbour's port."""
        pp = self.placed.get(peer.guid)
        if pp is None:
            return None
        here = Port(pp.name, peer.port)
        dl = self.design.by_port.get(here)
        return None if dl is None else dl.other(here)

    def _infer_switches(self) -> None:
        pending = {g for g, n in self.top.nodes.items()
                   if n.type is NodeType.SWITCH and g not in self.placed and g not in self.ignored_set}
        while pending:
            votes: dict[str, Counter[str]] = {}
            for guid in pending:
                c: Counter[str] = Counter()
                for port, peer in self.adjacency.get(guid, ()):
                    far = self._far_end(peer)
                    if far is None or far.node in self.taken:
                        continue
                    if self.design.nodes[far.node].type is not NodeType.SWITCH:
                        continue
                    c[far.node] += 2 if far.port == port else 1
                if c:
                    votes[guid] = c
            if not votes:
                break
            ranked = sorted(((n, g, name) for g, c in votes.items() for name, n in c.items()),
                            key=lambda t: (-t[0], t[1], t[2]))
            progress = False
            for count, guid, name in ranked:
                if guid in self.placed or name in self.taken:
                    continue
                best = votes[guid].most_common(2)
                if count < best[0][1]:
                    continue
                if len(best) == 2 and best[0][1] == best[1][1]:
                    self.reasons[guid] = f"ambiguous: its neighbours point equally at {best[0][0]} and {best[1][0]}"
                    continue
                self.place(guid, name, "neighbours")
                pending.discard(guid)
                self.reasons.pop(guid, None)
                progress = True
            if not progress:
                break

    def _place_cas_by_position(self) -> None:
        for guid, node in self.top.nodes.items():
            if guid in self.placed or guid in self.ignored_set or node.type is NodeType.SWITCH:
                continue
            for _port, peer in self.adjacency.get(guid, ()):
                far = self._far_end(peer)
                if far is None or far.node in self.taken or self.design.nodes[far.node].type is NodeType.SWITCH:
                    continue
                self.place(guid, far.node, "position")
                where = self.placed[peer.guid].name
                self.notes.append(f"HCA {guid} (\"{node.description}\") placed as {far.node} by the port it is "
                                  f"cabled to ({where}[{peer.port}]): its node description does not name it")
                break

    def _why_unplaced(self, guid: str) -> str:
        node = self.top.nodes[guid]
        neighbours = [peer for _p, peer in self.adjacency.get(guid, ())]
        placed_nb = [f"{self.placed[e.guid].name}[{e.port}]" for e in neighbours if e.guid in self.placed]
        if node.type is NodeType.SWITCH:
            if not neighbours:
                return "it has no links in this capture"
            if not placed_nb:
                return "none of its neighbours could be placed, so nothing says where it is"
            return ("it is cabled to " + ", ".join(placed_nb[:4]) + (" ..." if len(placed_nb) > 4 else "")
                    + ", ports where the design expects no switch that is still unplaced")
        expected = ca_name_from_description(node.description)
        where = (f"; cabled to {', '.join(placed_nb[:2])}, where the design expects no unplaced HCA"
                 if placed_nb else "")
        if expected:
            return f"its node description \"{node.description}\" names no designed HCA ({expected}){where}"
        return f"its node description \"{node.description}\" is not '<host> <hca>'{where}"
