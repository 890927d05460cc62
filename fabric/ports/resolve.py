"""From the names UFM and the tools give a port to the discovered fabric's ports, names and locations.

An event may name a port by GUID and number (dev_id, `<guid>_<port>`), or only by node name and port
(a peer in `Peer info:`, Imbue's `Peer Port T2-E63-L-U37:1/19/2`). Names are looked up among the node
descriptions of the discovered fabric (a switch renamed `MF0;<name>:<model>/U1` answers to `<name>`, an
HCA to `<host> <hca>`), UFM's own port list when given, and the design's names when a design is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from fabric.design import Design, Location
from fabric.identify import Identification, identify, switch_name_from_description
from fabric.topology import End, Link, NodeType, Topology
from fabric.ufm.portrefs import PortRef
from fabric.ufm.resources import UfmPort


@dataclass(frozen=True, slots=True)
class LinkEnd:
    guid: str
    name: str
    port: int
    is_switch: bool
    location: Location | None = None
    label: str | None = None  # UFM's port label ("1/17/1") when known

    def to_dict(self) -> dict[str, object]:
        return {"guid": f"0x{self.guid}", "name": self.name, "port": self.port, "label": self.label,
                "location": self.location.to_dict() if self.location else None}

    def describe(self) -> str:
        where = f" ({self.location})" if self.location else ""
        return f"{self.name}[{self.port}]{where}"


class Resolver:
    def __init__(self, topology: Topology, design: Design | None = None,
                 ufm_ports: Mapping[End, UfmPort] | None = None) -> None:
        self.topology = topology
        self.design = design
        self.ufm_ports = ufm_ports or {}
        self.ident: Identification | None = identify(design, topology) if design is not None else None

    @cached_property
    def _names(self) -> tuple[dict[str, str], frozenset[str]]:
        """name -> GUID for every name that one node answers to; and the names several nodes share."""
        claims: dict[str, set[str]] = {}
        for node in self.topology.nodes.values():
            desc = node.description.strip()
            claims.setdefault(desc, set()).add(node.guid)
            if node.type is NodeType.SWITCH:
                claims.setdefault(switch_name_from_description(desc), set()).add(node.guid)
        for port in self.ufm_ports.values():
            for name in (port.system_name, port.node_description):
                if name:
                    claims.setdefault(name.split(":")[0].strip(), set()).add(port.end.guid)
        unique = {name: next(iter(guids)) for name, guids in claims.items() if len(guids) == 1}
        if self.ident is not None:
            unique.update(self.ident.by_name)
        return unique, frozenset(n for n, g in claims.items() if len(g) > 1 and n not in unique)

    def end(self, ref: PortRef) -> End | None:
        if ref.port is None:
            return None
        if ref.guid is not None and ref.guid in self.topology.nodes:
            return End(ref.guid, ref.port)
        guid = self._names[0].get(ref.name.strip()) if ref.name else None
        return End(guid, ref.port) if guid is not None else None

    def link(self, end: End) -> Link | None:
        return self.topology.by_end.get(end)

    def name(self, guid: str) -> str:
        if self.ident is not None:
            placed = self.ident.name(guid)
            if placed is not None:
                return placed
        node = self.topology.nodes.get(guid)
        if node is None:
            return f"0x{guid}"
        desc = node.description.strip()
        name = switch_name_from_description(desc) if node.type is NodeType.SWITCH else desc
        # factory switches all say "Quantum Mellanox Technologies": only the GUID tells them apart
        return f"{name} 0x{guid}" if name in self._names[1] or not name else name

    def link_end(self, end: End) -> LinkEnd:
        node = self.topology.nodes.get(end.guid)
        name = self.name(end.guid)
        location = None
        if self.design is not None and name in self.design.nodes:
            location = self.design.nodes[name].location
        ufm = self.ufm_ports.get(end)
        return LinkEnd(end.guid, name, end.port, node is not None and node.type is NodeType.SWITCH, location,
                       ufm.label if ufm else None)

    def cable(self, link: Link) -> str | None:
        for end in (link.a, link.b):
            port = self.ufm_ports.get(end)
            if port is not None and port.cable_serial:
                return port.cable_serial
        return None

    @cached_property
    def tiers(self) -> dict[str, int]:
        """Switch GUID -> tier: 1 for switches with HCAs, then one more per hop away from them."""
        adjacency = self.topology.adjacency
        nodes = self.topology.nodes
        tier: dict[str, int] = {}
        frontier = [g for g, n in nodes.items() if n.type is NodeType.SWITCH
                    and any(nodes.get(far.guid) is not None and nodes[far.guid].type is not NodeType.SWITCH
                            for _p, far in adjacency.get(g, ()))]
        level = 1
        while frontier:
            for g in frontier:
                tier[g] = level
            nxt = {far.guid for g in frontier for _p, far in adjacency.get(g, ())
                   if far.guid not in tier and nodes.get(far.guid) is not None
                   and nodes[far.guid].type is NodeType.SWITCH}
            frontier, level = sorted(nxt), level + 1
        return tier

    def uplink_owner(self, link: Link) -> str | None:
        """The switch whose uplink `link` is (the lower-tier end of a switch-to-switch link)."""
        ta, tb = self.tiers.get(link.a.guid), self.tiers.get(link.b.guid)
        if ta is None or tb is None or ta == tb:
            return None
        return link.a.guid if ta < tb else link.b.guid

    @cached_property
    def uplinks(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for link in self.topology.links:
            owner = self.uplink_owner(link)
            if owner is not None:
                counts[owner] = counts.get(owner, 0) + 1
        return counts
