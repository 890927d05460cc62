"""A burn-in planner in the style Imbue describes, and what it really burns under the fabric's real LFTs.

Imbue's generator modelled adaptive routing: each flow spread evenly over all shortest paths between its
leaves (a link's share is the fraction of shortest paths through it), packed host pairs per stage while
every link's modelled load stayed <= 1.0, counted a link as burned at load >= 0.5, up to 128 stages.
`imbue_plan` does that (greedy, deterministic). `real_burn` then walks each planned flow's path through the
real forwarding tables (static routing: one path per destination) and counts the links that carried a
flow running at full rate (a flow whose busiest real link carries it alone).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fabric.burnin.routes import Hca, Routing, Unknown, route_from, uplink_index
from fabric.topology import End

HALF = 0.5


@dataclass(frozen=True)
class ImbuePlan:
    stages: tuple[tuple[tuple[Hca, Hca], ...], ...]
    modelled_burned: frozenset[int]  # links some stage loaded >= 0.5 in the model


class _Graph:
    def __init__(self, routing: Routing) -> None:
        self.routing = routing
        self.adj: dict[str, list[tuple[str, int]]] = {}
        for i, lk in enumerate(routing.links):
            if lk.kind == "switch-switch":
                self.adj.setdefault(lk.tail.guid, []).append((lk.head.guid, i))
        self.up = uplink_index(routing)
        self.down = {lk.head: i for i, lk in enumerate(routing.links) if lk.kind == "leaf-hca"}
        self._bfs: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        self._frac: dict[tuple[str, str], dict[int, float]] = {}

    def bfs(self, src: str) -> tuple[dict[str, int], dict[str, int]]:
        if src not in self._bfs:
            dist, sigma = {src: 0}, {src: 1}
            todo = deque([src])
            while todo:
                u = todo.popleft()
                for v, _i in self.adj.get(u, ()):
                    if v not in dist:
                        dist[v], sigma[v] = dist[u] + 1, 0
                        todo.append(v)
                    if dist[v] == dist[u] + 1:
                        sigma[v] += sigma[u]
            self._bfs[src] = (dist, sigma)
        return self._bfs[src]

    def fractions(self, a: str, b: str) -> dict[int, float]:
        """Directed switch link -> share of the a->b traffic over all shortest paths (the graph is symmetric)."""
        key = (a, b)
        if key not in self._frac:
            da, sa = self.bfs(a)
            db, sb = self.bfs(b)
            out: dict[int, float] = {}
            if b in da:
                total, d = sa[b], da[b]
                for u, du in da.items():
                    if du + db.get(u, 10**9) != d:
                        continue
                    for v, i in self.adj.get(u, ()):
                        if da.get(v) == du + 1 and da[v] + db.get(v, 10**9) == d:
                            out[i] = sa[u] * sb[v] / total
            self._frac[key] = out
        return self._frac[key]

    def flow_share(self, src: Hca, dst: Hca) -> dict[int, float]:
        share = dict(self.fractions(src.leaf.guid, dst.leaf.guid))
        share[self.up[src.end]] = 1.0
        share[self.down[dst.end]] = 1.0
        return share


def imbue_plan(routing: Routing, max_stages: int = 128, tries: int = 24) -> ImbuePlan:
    g = _Graph(routing)
    hcas = [h for h in routing.hcas if h.end in g.up and h.end in g.down]
    burned: set[int] = set()
    stages: list[tuple[tuple[Hca, Hca], ...]] = []
    offset = 0
    by_leaf: dict[str, list[Hca]] = {}
    for h in hcas:
        by_leaf.setdefault(h.leaf.guid, []).append(h)
    leaves = sorted(by_leaf)
    while len(stages) < max_stages:
        load: dict[int, float] = {}
        receiving: set[End] = set()
        pairs: list[tuple[Hca, Hca]] = []
        for k, src in enumerate(hcas):
            mine = leaves.index(src.leaf.guid)
            for t in range(tries):  # receivers on another leaf (the next one each stage), to load its uplinks
                peers = by_leaf[leaves[(mine + 1 + offset) % len(leaves)]]
                dst = peers[(k + t) % len(peers)]
                if dst.end in receiving or dst.host == src.host:
                    continue
                share = g.flow_share(src, dst)
                if any(load.get(i, 0.0) + s > 1.0 + 1e-9 for i, s in share.items()):
                    continue
                if all(i in burned for i in share):
                    continue  # adds load only to links already burned
                for i, s in share.items():
                    load[i] = load.get(i, 0.0) + s
                pairs.append((src, dst))
                receiving.add(dst.end)
                break
        offset += 1
        if not pairs:
            break
        new = {i for i, x in load.items() if x >= HALF} - burned
        burned |= new
        stages.append(tuple(pairs))
        if not new:
            break
    return ImbuePlan(tuple(stages), frozenset(burned))


def real_burn(routing: Routing, plan: ImbuePlan) -> tuple[set[int], int, int]:
    """(links carrying a full-rate flow under the real tables, flows planned, flows that ran at full rate)."""
    up = uplink_index(routing)
    memo: dict[End, dict[int, tuple[int, ...] | Unknown]] = {}
    full: set[int] = set()
    planned = at_rate = 0
    for stage in plan.stages:
        paths = []
        for src, dst in stage:
            route = route_from(routing, routing.switch_index[src.leaf.guid], dst, memo.setdefault(dst.end, {}))
            if not isinstance(route, Unknown):
                paths.append((up[src.end], *route))
        load: dict[int, int] = {}
        for path in paths:
            for i in path:
                load[i] = load.get(i, 0) + 1
        planned += len(stage)
        for path in paths:
            if max(load[i] for i in path) == 1:
                at_rate += 1
                full.update(path)
    return full, planned, at_rate
