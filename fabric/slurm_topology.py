"""Slurm's `topology.conf` (topology/tree) and a leaf-grouped rank order, from the fabric as built.

Pure: a discovered `Topology`, the host each HCA belongs to, the links to leave out and the design's switch
names in; a frozen `SlurmTopology` out, rendered by `topology_conf()`, `rank_order_text()` or `to_json()`.

Links left out: those the port ledger has out of service (planned, disabled, failed to apply, refused
re-enabling) and those whose latest burn-in verdict, in either direction, is `fail` (a repaired link stays
out until a burn-in passes it again).

Levels come from the graph of usable links: a leaf is a switch with a CA cabled to it (a host's HCA, or a
storage server's, UFM's: not the SHARP aggregation node inside a switch); level n+1 is every switch linked to
a level-n switch and not levelled yet; a switch's children are its neighbours one level down (a leaf goes
under every spine it reaches: Slurm accepts a switch in several `Switches=` lists).

A host whose HCAs reach several leaves (rail-optimised fabrics: 8 HCAs, 8 leaves) is listed under one leaf
only, its home leaf. Slurm 22.05 reads a node under several leaf switches but reports it at every start
("WARNING: Multiple leaf switches contain nodes", with the comment "possibly due to bad configuration file"),
the node's SLURM_TOPOLOGY_ADDR then names all those leaves, and placement counts it on each (slurm-22-05-8-1:
src/plugins/topology/tree/topology_tree.c `_validate_switches`, `topo_get_node_addr`;
src/plugins/select/cons_tres/job_test.c `_eval_nodes_topo`). The home leaf is,
in order: the leaf most of the host's usable HCA links reach; a leaf with an uplink before one without; the
leaf the most hosts reach (a rail-optimised scalable unit stays together whatever its HCAs are called); the
leaf of the host's first HCA in natural order (mlx5_0: rail 0); the leaf's name. Leaves no host calls home
are not written, nor switches left without a written child (a switch with neither Nodes nor Switches is
fatal to slurmctld: "lacks children"). A written leaf with no parent is an island: no job spans it and
another leaf unless slurm.conf has TopologyParam=TopoOptional.

Switch names are the design's where the switch was identified, else the name in its node description
(`MF0;<name>:<model>/U1`), made Slurm-safe: letters, digits, `-` and `_` only (no `.`: it separates the
parts of SLURM_TOPOLOGY_ADDR; no `[` or `,`: hostlist syntax); names that collide get the switch GUID
appended. The original description is kept, escaped, in a comment. Host names that are not plain
hostnames are never written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabric.errors import FabricError
from fabric.identify import switch_name_from_description
from fabric.topology import End, Link, NodeType, Topology
from fabric.topology_inputs import HostMap, LinkKey, escape
from provision.hostfiles import compress_hostlist

HOME_RULE = ("one leaf per host: most of its HCA links, then a leaf with an uplink, then the leaf most hosts "
             "reach, then its first HCA's leaf, then the name")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 48


@dataclass(frozen=True)
class SlurmSwitch:
    name: str
    guid: str
    description: str
    level: int
    nodes: tuple[str, ...] = ()  # a leaf's hosts
    switches: tuple[str, ...] = ()  # an upper switch's written children
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostPlacement:
    host: str
    leaf: str
    leaves: tuple[str, ...]  # every leaf its usable HCA links reach
    hcas: tuple[str, ...]


@dataclass(frozen=True)
class ExcludedLink:
    a: str
    b: str
    why: str


@dataclass(frozen=True)
class SlurmTopology:
    source: str
    switches: tuple[SlurmSwitch, ...]  # leaves first, then each level up; by name within a level
    hosts: tuple[HostPlacement, ...]  # in rank order
    islands: tuple[str, ...] = ()
    unlisted_leaves: tuple[str, ...] = ()  # leaves no host calls home
    unplaced: tuple[str, ...] = ()  # hosts with no usable link to a switch
    excluded: tuple[ExcludedLink, ...] = ()
    warnings: tuple[str, ...] = ()
    parts: int = 1
    meta: Mapping[str, Any] = field(default_factory=dict)


def slurm_name(text: str) -> str:
    """A Slurm-safe switch name from any text (empty when nothing usable is left)."""
    return _UNSAFE.sub("-", text).strip("-_")[:MAX_NAME].strip("-_")


def natural(name: str) -> str:
    """Sort key: numbers compare by value (leaf-2 before leaf-10)."""
    return re.sub(r"\d+", lambda m: m.group().zfill(12), name.lower()) + "\0" + name


def switch_names(top: Topology, design_names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Switch GUID -> unique Slurm-safe name (the design's, else the description's; GUID added on collision)."""
    base: dict[str, str] = {}
    for node in top.switches():
        given = (design_names or {}).get(node.guid) or switch_name_from_description(node.description)
        base[node.guid] = slurm_name(given) or "switch"
    count: dict[str, int] = {}
    for name in base.values():
        count[name.lower()] = count.get(name.lower(), 0) + 1
    named = {g: (n if count[n.lower()] == 1 else f"{n[:MAX_NAME - 17]}-{g}") for g, n in base.items()}
    seen: set[str] = set()
    for guid in sorted(named):
        name, i = named[guid], 1
        while name.lower() in seen:
            i += 1
            name = f"{named[guid]}-{i}"
        seen.add(name.lower())
        named[guid] = name
    return named


def _key(link: Link) -> LinkKey:
    return frozenset((link.a, link.b))


def build(top: Topology, hosts: HostMap, excluded: Mapping[LinkKey, str] | None = None,
          design_names: Mapping[str, str] | None = None) -> SlurmTopology:
    """The tree Slurm is told: leaves with their hosts, each upper switch with its written children."""
    excluded = excluded or {}
    names = switch_names(top, design_names)
    switches = {n.guid for n in top.switches()}
    gone: list[ExcludedLink] = []
    reach: dict[str, dict[str, list[str]]] = {}  # host -> leaf guid -> its HCAs there
    edge: set[str] = set()  # switches with a CA (a host's, a storage server's, UFM's) on a usable link
    adj: dict[str, set[str]] = {g: set() for g in switches}
    lost: dict[str, list[str]] = {}  # switch -> why each of its switch links was left out
    for link in top.links:
        a, b = link.a, link.b
        why = excluded.get(_key(link))
        if why is not None:
            gone.append(ExcludedLink(_end_name(top, names, hosts, a), _end_name(top, names, hosts, b), why))
            if a.guid in switches and b.guid in switches:
                lost.setdefault(a.guid, []).append(why)
                lost.setdefault(b.guid, []).append(why)
            continue
        for ca, sw in ((a, b), (b, a)):
            node = top.nodes.get(ca.guid)
            if sw.guid not in switches or node is None or node.type is NodeType.SWITCH or node.is_aggregation_node:
                continue
            edge.add(sw.guid)
            hca = hosts.hcas.get(ca.guid)
            if hca is not None:
                reach.setdefault(hca.host, {}).setdefault(sw.guid, []).append(hca.name)
        if a.guid in switches and b.guid in switches and a.guid != b.guid:
            adj[a.guid].add(b.guid)
            adj[b.guid].add(a.guid)
    level = _levels(edge, adj)
    parents = {g: {n for n in adj[g] if level.get(n) == lv + 1} for g, lv in level.items()}
    home = _homes(reach, parents, names)
    written = _written(home, level, parents)
    placed_hosts = sorted(home, key=natural)
    unplaced = sorted({hca.host for hca in hosts.hcas.values()} - set(home), key=natural)
    out: list[SlurmSwitch] = []
    for g in sorted(written, key=lambda g: (level[g], natural(names[g]))):
        ups = tuple(sorted((names[p] for p in parents[g] if p in written), key=natural))
        if level[g] == 0:
            nodes = tuple(h for h in placed_hosts if home[h] == g)
            out.append(SlurmSwitch(names[g], g, top.nodes[g].description, 0, nodes=nodes, parents=ups))
        else:
            kids = tuple(sorted((names[c] for c in written if g in parents[c]), key=natural))
            out.append(SlurmSwitch(names[g], g, top.nodes[g].description, level[g], switches=kids, parents=ups))
    islands = tuple(s.name for s in out if s.level == 0 and not s.parents)
    warnings = list(hosts.warnings)
    for s in out:
        if s.name in islands:
            cut = lost.get(s.guid)
            cause = f"every uplink left out ({len(cut)}: {cut[0]})" if cut else "no uplink in this capture"
            warnings.append(f"leaf {s.name} has {cause}: it is its own island with no parent switch; Slurm never "
                            "places a job on it and another leaf unless slurm.conf has TopologyParam=TopoOptional")
    parts = len(set(_groups(out).values()))
    if parts - len(islands) > 1:
        warnings.append(f"the written tree is in {parts} parts with no common switch: Slurm never places a job "
                        "across them unless TopologyParam=TopoOptional")
    if unplaced:
        warnings.append(f"{len(unplaced)} host(s) have no usable link to a switch and are not written (slurmctld "
                        f"will say the switches lack access to them): {', '.join(unplaced[:5])}")
    unlisted = tuple(sorted((names[g] for g, lv in level.items() if lv == 0 and g not in written), key=natural))
    result = SlurmTopology(top.source, tuple(out), (), islands, unlisted, tuple(unplaced),
                           tuple(sorted(gone, key=lambda x: (natural(x.a), natural(x.b)))), tuple(warnings), parts,
                           {"hcas_of_other_hosts": hosts.others, "links_left_out_not_in_capture":
                            len(set(excluded) - {_key(lk) for lk in top.links})})
    order = _rank(result)
    placements = tuple(HostPlacement(h, names[home[h]], tuple(sorted((names[g] for g in reach[h]), key=natural)),
                                     tuple(sorted({n for v in reach[h].values() for n in v}, key=natural)))
                       for h in order)
    if not placements:
        raise FabricError("no host is cabled to a switch over a usable link: there is no topology to write"
                          + (f" ({hosts.warnings[0]})" if hosts.warnings else ""))
    return replace(result, hosts=placements)


def _end_name(top: Topology, names: Mapping[str, str], hosts: HostMap, end: End) -> str:
    hca = hosts.hcas.get(end.guid)
    if hca is not None:
        return f"{hca.host}/{hca.name}[{end.port}]"
    return f"{names.get(end.guid) or '0x' + end.guid}[{end.port}]"


def _levels(leaves: Collection[str], adj: Mapping[str, set[str]]) -> dict[str, int]:
    level = dict.fromkeys(leaves, 0)
    frontier, lv = set(leaves), 0
    while frontier:
        lv += 1
        frontier = {n for g in frontier for n in adj[g] if n not in level}
        level.update(dict.fromkeys(frontier, lv))
    return level


def _homes(reach: Mapping[str, Mapping[str, list[str]]], parents: Mapping[str, set[str]],
           names: Mapping[str, str]) -> dict[str, str]:
    popularity: dict[str, int] = {}
    for leaves in reach.values():
        for g in leaves:
            popularity[g] = popularity.get(g, 0) + 1
    home = {}
    for host, leaves in reach.items():
        first = {g: min(natural(h) for h in hcas) for g, hcas in leaves.items()}
        home[host] = min(leaves, key=lambda g: (-len(leaves[g]), not parents[g], -popularity[g], first[g],
                                                natural(names[g])))
    return home


def _written(home: Mapping[str, str], level: Mapping[str, int], parents: Mapping[str, set[str]]) -> set[str]:
    written = set(home.values())
    todo = set(written)
    while todo:
        todo = {p for g in todo for p in parents[g]} - written
        written |= todo
    return {g for g in written if g in level}


def _groups(switches: Sequence[SlurmSwitch], top_level: int | None = None) -> dict[str, str]:
    """Switch name -> the key of its group: switches joined through parent links (`top_level`: only links up
    to that level, so 1 groups leaves into pods that share spines); a group's key is its first host's name."""
    root = {s.name: s.name for s in switches}
    level = {s.name: s.level for s in switches}

    def find(x: str) -> str:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for s in switches:
        for p in s.parents:
            if top_level is None or level[p] <= top_level:
                root[find(s.name)] = find(p)
    first: dict[str, str] = {}
    for s in switches:
        if s.level == 0:
            r, key = find(s.name), min((natural(h) for h in s.nodes), default=natural(s.name))
            first[r] = min(first.get(r, key), key)
    return {s.name: first.get(find(s.name), natural(s.name)) for s in switches}


def _rank(t: SlurmTopology) -> list[str]:
    """Hosts by leaf, by name within a leaf. Leaves by their first host within their pod (leaves that share
    spines), pods by their first host within their part (switches joined through any parent): neighbours
    share a leaf, then a spine."""
    part, pod = _groups(t.switches), _groups(t.switches, top_level=1)
    leaves = sorted((s for s in t.switches if s.level == 0),
                    key=lambda s: (part[s.name], pod[s.name], min(map(natural, s.nodes), default=""), s.name))
    return [h for s in leaves for h in s.nodes]


def rank_order(t: SlurmTopology) -> tuple[str, ...]:
    return tuple(p.host for p in t.hosts)


def rank_order_text(t: SlurmTopology) -> str:
    """One host per line, a hostfile `python -m training launch --hostfile` reads."""
    return "".join(f"{h}\n" for h in rank_order(t))


def topology_conf(t: SlurmTopology) -> str:
    """topology.conf(5) text: `SwitchName=<name> Nodes=<hostlist>` / `SwitchName=<name> Switches=<hostlist>`."""
    lines = ["# topology.conf for TopologyPlugin=topology/tree, written by `fabric topology --format slurm`",
             f"# from: {escape(t.source)}",
             f"# {HOME_RULE}"]
    if t.excluded:
        lines.append(f"# links left out: {len(t.excluded)} (port ledger out of service, burn-in failed)")
    if t.unlisted_leaves:
        unlisted = escape(", ".join(t.unlisted_leaves), 400, quotes=False)
        lines.append(f"# leaves no host calls home (not written): {unlisted}")
    lines += [f"# warning: {escape(w, 400, quotes=False)}" for w in t.warnings]
    for s in t.switches:
        lines.append(f'# {s.name}: level {s.level}, GUID 0x{s.guid}, "{escape(s.description)}"'
                     + (" ISLAND: no parent switch" if s.name in t.islands else ""))
        if s.level == 0:
            lines.append(f"SwitchName={s.name} Nodes={compress_hostlist(s.nodes)}")
        else:
            lines.append(f"SwitchName={s.name} Switches={compress_hostlist(s.switches)}")
    return "\n".join(lines) + "\n"


def to_json(t: SlurmTopology) -> dict[str, Any]:
    return {
        "source": t.source, "rule": HOME_RULE, "parts": t.parts, "islands": list(t.islands),
        "switches": [{"name": s.name, "guid": s.guid, "description": s.description, "level": s.level,
                      "nodes": list(s.nodes), "switches": list(s.switches), "parents": list(s.parents),
                      "island": s.name in t.islands} for s in t.switches],
        "hosts": [{"host": p.host, "leaf": p.leaf, "leaves": list(p.leaves), "hcas": list(p.hcas)} for p in t.hosts],
        "rank_order": list(rank_order(t)), "unlisted_leaves": list(t.unlisted_leaves), "unplaced": list(t.unplaced),
        "excluded_links": [{"a": x.a, "b": x.b, "why": x.why} for x in t.excluded],
        "warnings": list(t.warnings), **dict(t.meta),
    }
