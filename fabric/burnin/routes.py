"""The path of any HCA-to-HCA flow, from the discovered topology and the switches' real forwarding tables.

`build_routing` joins an `ibnetdiscover` Topology with an `LftDump`: every HCA whose node description
names a host (`<host> <hca>`, as `fabric validate --baseline` reads it) takes part, and its LID is the one
its own leaf switch forwards out of the port the HCA is cabled to, which the dump must describe with the
same node description. A dump whose switches are not in the topology, or whose LIDs name other HCAs than
those cabled there, is from a different fabric (or older than the capture): `RoutingError`, never a path.

A flow's path is the sender's uplink, then at each switch the out-port its table gives for the
receiver's LID, across the link the topology has on that port, until the link into the receiver. A
switch without a table (a truncated dump), without an entry for that LID, forwarding onto a port with no
link, or into a loop, makes that flow `Unknown` with the reason; a walk that ends at another HCA than
the receiver is a `RoutingError` (the tables and the topology disagree).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from fabric.burnin.lft import NO_PORT, LftDump
from fabric.errors import FabricError
from fabric.identify import ca_name_from_description, switch_name_from_description
from fabric.topology import End, NodeType, Topology


class RoutingError(FabricError):
    """The forwarding tables cannot be used with this topology (another fabric, inconsistent routes)."""


@dataclass(frozen=True, slots=True)
class Unknown:
    reason: str


@dataclass(frozen=True, slots=True)
class Hca:
    end: End  # the CA's node GUID and port in the topology
    port_guid: str
    lid: int
    name: str  # <host>/<hca>
    host: str
    leaf: End  # the switch port it is cabled to


@dataclass(frozen=True, slots=True)
class DirectedLink:
    tail: End
    head: End
    kind: str  # hca-leaf, leaf-hca, switch-switch

    def __str__(self) -> str:
        return f"{self.tail}->{self.head}"


@dataclass(frozen=True, slots=True)
class Excluded:
    what: str
    reason: str


# (link index, next switch index or -1 when the link leaves the switches, far end)
_Hop = tuple[int, int, End]


@dataclass(frozen=True)
class Routing:
    topology: Topology = field(repr=False)
    hcas: tuple[Hca, ...]
    excluded: tuple[Excluded, ...]  # HCAs that cannot take part, and why
    links: tuple[DirectedLink, ...]  # every directed link HCA traffic could cross
    names: Mapping[str, str]  # node GUID -> display name
    switch_guids: tuple[str, ...]
    tables: tuple[bytes | None, ...] = field(repr=False)  # by switch index; None: not in the dump
    hops: tuple[Mapping[int, _Hop], ...] = field(repr=False)  # by switch index: out-port -> hop
    switch_index: Mapping[str, int] = field(repr=False)
    warnings: tuple[str, ...] = ()

    def end_name(self, end: End) -> str:
        return f"{self.names.get(end.guid, end.guid)}[{end.port}]"

    def link_name(self, link: DirectedLink) -> str:
        return f"{self.end_name(link.tail)} -> {self.end_name(link.head)}"


def node_names(top: Topology) -> dict[str, str]:
    raw: dict[str, str] = {}
    for guid, node in top.nodes.items():
        if node.type is NodeType.SWITCH:
            raw[guid] = switch_name_from_description(node.description) or f"switch-{guid}"
        else:
            raw[guid] = ca_name_from_description(node.description) or (node.description or f"ca-{guid}")
    seen: dict[str, int] = {}
    for name in raw.values():
        seen[name] = seen.get(name, 0) + 1
    return {g: (n if seen[n] == 1 else f"{n}@{g}") for g, n in raw.items()}


def build_routing(top: Topology, dump: LftDump, hosts: Collection[str] | None = None) -> Routing:
    """`hosts`: only HCAs of these hosts take part (None: every HCA whose description names a host)."""
    switches = sorted(g for g, n in top.nodes.items() if n.type is NodeType.SWITCH)
    foreign = sorted(set(dump.switches) - set(switches))
    if foreign:
        raise RoutingError(
            f"{dump.source}: {len(foreign)} of its {len(dump.switches)} switch tables are for switches the "
            f"discovered fabric does not have (0x{foreign[0]}{', ...' if len(foreign) > 1 else ''}): the "
            f"tables come from a different fabric, or from before a switch was replaced; dump both again")
    index = {g: i for i, g in enumerate(switches)}
    names = node_names(top)
    tables = tuple(dump.switches[g].out_ports if g in dump.switches else None for g in switches)
    warnings = list(dump.warnings)
    warnings += [f"switch {names[g]} (0x{g}) has no forwarding table in {dump.source}: flows through it are "
                 "unknown" for g in switches if g not in dump.switches]
    hcas, excluded = _hcas(top, dump, names, index, tables, hosts)
    taking_part = {h.end for h in hcas}
    links: list[DirectedLink] = []
    hops: list[dict[int, _Hop]] = [{} for _ in switches]
    for link in top.links:
        for tail, head in ((link.a, link.b), (link.b, link.a)):
            kind = _kind(top, tail, head, taking_part)
            if kind is None:
                continue
            if tail.guid in index:
                hops[index[tail.guid]][tail.port] = (len(links), index.get(head.guid, -1), head)
            links.append(DirectedLink(tail, head, kind))
    return Routing(top, tuple(hcas), tuple(excluded), tuple(links), names, tuple(switches), tables,
                   tuple(hops), index, tuple(warnings))


def _kind(top: Topology, tail: End, head: End, taking_part: set[End]) -> str | None:
    t_switch = top.nodes[tail.guid].type is NodeType.SWITCH
    h_switch = top.nodes[head.guid].type is NodeType.SWITCH
    if t_switch and h_switch:
        return "switch-switch"
    if t_switch and head in taking_part:
        return "leaf-hca"
    if h_switch and tail in taking_part:
        return "hca-leaf"
    return None


def _hcas(top: Topology, dump: LftDump, names: Mapping[str, str], index: Mapping[str, int],
          tables: tuple[bytes | None, ...], hosts: Collection[str] | None) -> tuple[list[Hca], list[Excluded]]:
    ca_lids_by_leaf_port: dict[str, dict[int, list[int]]] = {}
    hcas: list[Hca] = []
    excluded: list[Excluded] = []
    for guid, node in sorted(top.nodes.items()):
        if node.type is NodeType.SWITCH or node.is_aggregation_node:
            continue
        label = ca_name_from_description(node.description)
        if label is None:
            continue
        host = label.split("/", 1)[0]
        if hosts is not None and host not in hosts:
            continue
        for port, leaf in sorted(top.adjacency.get(guid, [])):
            what = f"{names[guid]}[{port}]"
            if leaf.guid not in index:
                excluded.append(Excluded(what, f"cabled to {names.get(leaf.guid, leaf.guid)}, not to a switch"))
                continue
            table = tables[index[leaf.guid]]
            if table is None:
                excluded.append(Excluded(what, f"its leaf {names[leaf.guid]} has no table in the dump: unknown"))
                continue
            if leaf.guid not in ca_lids_by_leaf_port:
                ca_lids_by_leaf_port[leaf.guid] = _ca_lids(table, dump)
            lids = ca_lids_by_leaf_port[leaf.guid].get(leaf.port, [])
            if not lids:
                excluded.append(Excluded(what, f"no LID is forwarded to it at {names[leaf.guid]}[{leaf.port}]: "
                                               "the SM has not routed it (port down or not initialised)"))
                continue
            dest = dump.destinations[lids[0]]
            if dest.description.strip() != node.description.strip():
                raise RoutingError(
                    f"{dump.source}: LID {lids[0]} ('{dest.description}', port GUID 0x{dest.port_guid}) is "
                    f"forwarded to {names[leaf.guid]}[{leaf.port}], where the discovered fabric has "
                    f"'{node.description}': the tables come from a different fabric (or an older capture)")
            hcas.append(Hca(End(guid, port), dest.port_guid, lids[0], names[guid], host, leaf))
    return hcas, excluded


def _ca_lids(table: bytes, dump: LftDump) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    destinations = dump.destinations
    for lid, port in enumerate(table):
        if port != NO_PORT and port != 0:
            dest = destinations.get(lid)
            if dest is not None and dest.kind == "ca":
                out.setdefault(port, []).append(lid)
    return out


def route_from(routing: Routing, switch: int, dst: Hca,
               memo: dict[int, tuple[int, ...] | Unknown]) -> tuple[int, ...] | Unknown:
    """Link indices from switch index `switch` to `dst` following the tables; memo: per destination."""
    path: list[int] = []
    visited: list[int] = []
    cur = switch
    tail: tuple[int, ...] | Unknown
    while True:
        hit = memo.get(cur)
        if hit is not None:
            tail = hit
            break
        table = routing.tables[cur]
        port = table[dst.lid] if table is not None and dst.lid < len(table) else NO_PORT
        hop = routing.hops[cur].get(port)
        if hop is None or cur in visited:
            tail = Unknown(_why_unknown(routing, cur, dst, port, looped=cur in visited))
            break
        link, nxt, head = hop
        visited.append(cur)
        path.append(link)
        if nxt < 0:
            if head != dst.end:
                raise RoutingError(f"switch {routing.names[routing.switch_guids[cur]]} forwards LID {dst.lid} "
                                   f"({dst.name}) to {routing.end_name(head)}: the tables and the topology disagree")
            tail = ()
            break
        cur = nxt
    if isinstance(tail, Unknown):
        for s in visited:
            memo[s] = tail
        return tail
    full = (*path, *tail)
    for i, s in enumerate(visited):
        memo[s] = full[i:]
    return full if visited else tail


def _why_unknown(routing: Routing, switch: int, dst: Hca, port: int, looped: bool) -> str:
    name = routing.names[routing.switch_guids[switch]]
    if looped:
        return f"the tables loop at {name} for LID {dst.lid} ({dst.name})"
    if routing.tables[switch] is None:
        return f"switch {name} has no forwarding table in the dump (truncated?)"
    if port in (NO_PORT, 0):
        return f"switch {name} has no route for LID {dst.lid} ({dst.name})"
    return (f"switch {name} forwards LID {dst.lid} ({dst.name}) out of port {port}, which has no link in the "
            "discovered fabric (down since the capture?)")


def uplink_index(routing: Routing) -> dict[End, int]:
    """HCA end -> index of its hca-leaf link."""
    return {lk.tail: i for i, lk in enumerate(routing.links) if lk.kind == "hca-leaf"}


def flow_path(routing: Routing, src: Hca, dst: Hca, uplinks: Mapping[End, int] | None = None,
              ) -> tuple[DirectedLink, ...] | Unknown:
    """Every directed link the flow src -> dst crosses, in order (uplink first, the receiver's link last).

    `uplinks`: `uplink_index(routing)`, when the caller computes many paths."""
    if src.end == dst.end:
        return Unknown(f"{src.name} cannot send to itself")
    up = (uplinks if uplinks is not None else uplink_index(routing)).get(src.end)
    if up is None:
        return Unknown(f"{src.name} has no link to a switch")
    route = route_from(routing, routing.switch_index[src.leaf.guid], dst, {})
    if isinstance(route, Unknown):
        return route
    return tuple(routing.links[i] for i in (up, *route))
