"""The fabric as a capture reports it: nodes by GUID, undirected links, down ports, conflicts.

Every parser feeds a `TopologyBuilder` with what each line says (one direction of a link at a time) and
gets back a frozen `Topology`: links seen from both ends are merged, links seen from one end (a partial
capture) are kept, and two different ports claiming the same peer port are reported as a GUID conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import NamedTuple

AGGREGATION_NODE = "Mellanox Technologies Aggregation Node"


class NodeType(StrEnum):
    SWITCH = "switch"
    CA = "ca"
    ROUTER = "router"


class Node(NamedTuple):
    guid: str
    type: NodeType
    description: str
    nports: int | None = None
    lid: int | None = None
    line: int | None = None

    @property
    def is_aggregation_node(self) -> bool:
        """The SHARP engine inside a Quantum switch shows up as a CA; it is never cabled."""
        return self.type is NodeType.CA and self.description == AGGREGATION_NODE


class End(NamedTuple):
    guid: str
    port: int

    def __str__(self) -> str:
        return f"{self.guid}[{self.port}]"


class Link(NamedTuple):
    a: End
    b: End
    width: str | None = None
    speed: str | None = None
    could_be: str | None = None
    line: int | None = None

    def other(self, end: End) -> End:
        return self.b if end == self.a else self.a


@dataclass(frozen=True, slots=True)
class PortDown:
    end: End
    state: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class GuidConflict:
    """Evidence that one GUID stands for more than one physical device."""

    guid: str
    evidence: tuple[str, ...]
    claimants: tuple[End, ...] = ()


@dataclass(frozen=True)
class Topology:
    source: str
    nodes: Mapping[str, Node]
    links: tuple[Link, ...]
    down_ports: tuple[PortDown, ...] = ()
    conflicts: tuple[GuidConflict, ...] = ()
    warnings: tuple[str, ...] = ()
    by_end: Mapping[End, Link] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def adjacency(self) -> dict[str, list[tuple[int, End]]]:
        """guid -> [(local port, far end)] for every link."""
        out: dict[str, list[tuple[int, End]]] = {}
        for link in self.links:
            a, b = link.a, link.b
            out.setdefault(a.guid, []).append((a.port, b))
            out.setdefault(b.guid, []).append((b.port, a))
        return out

    def components(self) -> list[set[str]]:
        """Connected parts, largest first."""
        adjacency = self.adjacency
        seen: set[str] = set()
        parts: list[set[str]] = []
        for start in self.nodes:
            if start in seen:
                continue
            part = {start}
            todo = [start]
            while todo:
                for _port, far in adjacency.get(todo.pop(), ()):
                    if far.guid not in part:
                        part.add(far.guid)
                        todo.append(far.guid)
            seen |= part
            parts.append(part)
        return sorted(parts, key=lambda s: (-len(s), min(s)))

    def peer(self, end: End) -> End | None:
        link = self.by_end.get(end)
        return None if link is None else link.other(end)

    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.type is NodeType.SWITCH]

    def cas(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.type is not NodeType.SWITCH]


class TopologyBuilder:
    """Accumulates per-port reports from one capture; `build()` merges them into a `Topology`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._nodes: dict[str, Node] = {}
        self._peer_only: dict[str, Node] = {}
        # local end -> (peer end, width, speed, could_be, line)
        self._reports: dict[End, tuple[End, str | None, str | None, str | None, int | None]] = {}
        self._down: dict[End, PortDown] = {}
        self._conflicts: dict[str, list[str]] = {}
        self._claimants: dict[str, set[End]] = {}
        self._port_guids: dict[str, str] = {}
        self._reported_duplicates: list[tuple[str, int | None]] = []
        self.warnings: list[str] = []

    def warn(self, line: int | None, message: str) -> None:
        self.warnings.append(f"{self.source}:{line}: {message}" if line is not None else f"{self.source}: {message}")

    def add_node(self, node: Node) -> None:
        old = self._nodes.get(node.guid)
        if old is not None:
            self._conflict(
                node.guid,
                f"declared twice: line {old.line} ({old.type} \"{old.description}\") and line {node.line} "
                f"({node.type} \"{node.description}\")",
            )
            return
        self._nodes[node.guid] = node

    def note_peer(self, guid: str, type_: NodeType, description: str, lid: int | None = None) -> None:
        """A node only known as the far end of a port line (a partial capture, iblinkinfo -S)."""
        if guid not in self._peer_only:
            self._peer_only[guid] = Node(guid=guid, type=type_, description=description, lid=lid)

    def add_port(
        self,
        local: End,
        peer: End,
        width: str | None,
        speed: str | None,
        line: int | None,
        could_be: str | None = None,
    ) -> None:
        old = self._reports.get(local)
        if old is not None and old[0] != peer:
            self._conflict(
                local.guid,
                f"port {local.port} reported cabled to {old[0]} (line {old[4]}) and to {peer} (line {line})",
            )
            return
        self._reports[local] = (peer, width, speed, could_be, line)

    def port_guid(self, port_guid: str, node_guid: str) -> None:
        self._port_guids[port_guid] = node_guid

    def reported_duplicate(self, guid: str, line: int | None) -> None:
        """The tool itself said so (libibnetdisc: 'Duplicate Port: Port with guid 0x... already exists')."""
        self._reported_duplicates.append((guid, line))

    def add_down(self, end: End, state: str, line: int | None) -> None:
        self._down[end] = PortDown(end, state, line)

    def _conflict(self, guid: str, evidence: str) -> None:
        self._conflicts.setdefault(guid, []).append(evidence)

    def has_nodes(self) -> bool:
        return bool(self._nodes) or bool(self._reports)

    def build(self) -> Topology:
        nodes = dict(self._nodes)
        for guid, node in self._peer_only.items():
            nodes.setdefault(guid, node)
        for raw, line in self._reported_duplicates:
            guid = raw if raw in nodes else self._port_guids.get(raw, raw)
            self._conflict(guid, f"the discovery tool reported GUID 0x{raw} twice (line {line}): a second device "
                           "with this GUID is hidden behind the first")
            self._claimants.setdefault(guid, set()).update(
                peer for local, (peer, *_rest) in self._reports.items() if local.guid == guid)
            self._claimants[guid].update(local for local, (peer, *_rest) in self._reports.items()
                                         if peer.guid == guid)
        reports = self._reports
        links: dict[tuple[End, End], Link] = {}
        for local, (peer, width, speed, could_be, line) in reports.items():
            key = (local, peer) if local <= peer else (peer, local)
            if key in links:
                continue
            back = reports.get(peer)
            if back is not None:
                if back[0] != local:
                    # Both ends speak, but the far end names someone else: one GUID, two devices.
                    self._conflict(
                        peer.guid,
                        f"{local} (line {line}) says it is cabled to {peer}, but {peer} reports "
                        f"{back[0]} (line {back[4]})",
                    )
                    self._claimants.setdefault(peer.guid, set()).update((local, back[0]))
                    continue
                width = width or back[1]
                speed = speed or back[2]
                could_be = could_be or back[3]
            links[key] = Link(key[0], key[1], width, speed, could_be, line)
        by_end: dict[End, Link] = {}
        for link in links.values():
            for end in (link.a, link.b):
                if end in by_end:
                    self._conflict(end.guid, f"port {end.port} is one end of two links "
                                             f"(lines {by_end[end].line}, {link.line})")
                by_end[end] = link
        conflicts = tuple(GuidConflict(g, tuple(ev), tuple(sorted(self._claimants.get(g, ()))))
                          for g, ev in sorted(self._conflicts.items()))
        return Topology(
            source=self.source,
            nodes=nodes,
            links=tuple(links.values()),
            down_ports=tuple(d for e, d in self._down.items() if e not in by_end),
            conflicts=conflicts,
            warnings=tuple(self.warnings),
            by_end=by_end,
        )


def merge(topologies: Iterable[Topology]) -> Topology:
    """Union of captures taken from different attachment points (a split fabric is only seen piecewise)."""
    tops = list(topologies)
    if len(tops) == 1:
        return tops[0]
    nodes: dict[str, Node] = {}
    links: dict[tuple[End, End], Link] = {}
    down: dict[End, PortDown] = {}
    conflicts: dict[str, list[str]] = {}
    warnings: list[str] = []
    for top in tops:
        warnings.extend(top.warnings)
        for c in top.conflicts:
            conflicts.setdefault(c.guid, []).extend(c.evidence)
        for guid, node in top.nodes.items():
            old = nodes.get(guid)
            if old is None or (old.nports is None and node.nports is not None):
                nodes[guid] = node
        for link in top.links:
            links.setdefault((link.a, link.b), link)
        for d in top.down_ports:
            down.setdefault(d.end, d)
    by_end: dict[End, Link] = {}
    for link in links.values():
        for end in (link.a, link.b):
            other = by_end.get(end)
            if other is not None and other != link:
                conflicts.setdefault(end.guid, []).append(
                    f"port {end.port} is cabled to {other.other(end)} in one capture and {link.other(end)} in another"
                )
            by_end[end] = link
    return Topology(
        source="+".join(t.source for t in tops),
        nodes=nodes,
        links=tuple(links.values()),
        down_ports=tuple(d for e, d in down.items() if e not in by_end),
        conflicts=tuple(GuidConflict(g, tuple(ev)) for g, ev in sorted(conflicts.items())),
        warnings=tuple(warnings),
        by_end=by_end,
    )
