"""Burn-in stages from the real forwarding tables: every routed directed link carries one flow, at full rate.

A stage is a set of HCA-to-HCA flows in which each HCA sends at most one flow and receives at most one,
no flow joins two HCAs of one host, and no directed link carries two flows (so each runs at line rate).
Over all stages every directed link that some HCA-to-HCA route crosses (`routed`) carries a flow at
least once. Links no route crosses are `not_routed`: no data traffic uses them under this routing, so no
burn-in can reach them until the routing changes.

Planning is greedy per stage: receivers whose own links are hardest to reach go first, each taking the
sender (on any leaf, any rail) whose route crosses the most links not yet burned and no link already
busy in the stage. `plan_loads` then recomputes every flow's path from the tables and refuses a plan in
which a link carries two flows in one stage: never a silent overload.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from fabric.burnin.routes import Excluded, Hca, Routing, RoutingError, Unknown, flow_path, route_from, uplink_index
from fabric.topology import End


class PlanError(RoutingError):
    """A plan that would overload a link, or that cannot be built from these tables."""


@dataclass(frozen=True, slots=True)
class Flow:
    src: Hca
    dst: Hca
    links: tuple[int, ...]  # indices into routing.links, the sender's uplink first


@dataclass(frozen=True)
class RouteTable:
    """Known routes per receiver: receiver index -> {leaf switch index: link indices (leaf to receiver)}."""

    routes: tuple[dict[int, tuple[int, ...]], ...]
    unions: tuple[frozenset[int], ...]  # receiver index -> every link of its routes
    senders: dict[int, tuple[Hca, ...]]  # leaf switch index -> HCAs cabled to it
    reach: dict[End, int]  # sender -> how many receivers it has a known route to
    routed: frozenset[int]
    unknown: tuple[tuple[str, int], ...]  # (reason, flows)


@dataclass(frozen=True)
class Plan:
    routing: Routing
    stages: tuple[tuple[Flow, ...], ...]
    lower_bound: int
    bound_reason: str
    routed: frozenset[int]
    uncovered: tuple[int, ...]  # routed links no stage burned (empty unless flows were unknown)
    unknown: tuple[tuple[str, int], ...]

    @property
    def not_routed(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.routing.links)) if i not in self.routed)


def route_table(routing: Routing) -> RouteTable:
    senders: dict[int, list[Hca]] = {}
    for h in routing.hcas:
        senders.setdefault(routing.switch_index[h.leaf.guid], []).append(h)
    hosts_on = {leaf: {h.host for h in hs} for leaf, hs in senders.items()}
    routes: list[dict[int, tuple[int, ...]]] = []
    unknown: Counter[str] = Counter()
    known_from: Counter[int] = Counter()
    known_from_host: Counter[tuple[int, str]] = Counter()
    for dst in routing.hcas:
        memo: dict[int, tuple[int, ...] | Unknown] = {}
        known: dict[int, tuple[int, ...]] = {}
        for leaf, hosts in hosts_on.items():
            if len(hosts) == 1 and dst.host in hosts:
                continue  # every HCA on this leaf is on the receiver's own host
            route = route_from(routing, leaf, dst, memo)
            if isinstance(route, Unknown):
                unknown[route.reason] += sum(1 for h in senders[leaf] if h.host != dst.host)
                continue
            known[leaf] = route
            known_from[leaf] += 1
            known_from_host[leaf, dst.host] += 1
        routes.append(known)
    unions = tuple(frozenset().union(*r.values()) for r in routes)
    up = uplink_index(routing)
    # receivers a sender reaches: those with a known route from its leaf, less those on its own host
    reach = {h.end: known_from[leaf] - known_from_host[leaf, h.host] for leaf, hs in senders.items() for h in hs}
    routed = set().union(*unions, (up[end] for end, n in reach.items() if n > 0))
    return RouteTable(tuple(routes), unions, {k: tuple(v) for k, v in senders.items()}, reach, frozenset(routed),
                      tuple(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))))


def lower_bound(routing: Routing, table: RouteTable) -> tuple[int, str]:
    """Fewest stages any plan needs under these tables, and the receiver that forces it.

    Routing is by destination LID, so the routes into one receiver b form a tree rooted at b (each
    switch has one out-port for b's LID). Call a routed link *b's own* when every route that crosses it
    goes to b (b's link from its leaf always is; so is, say, a spine's down-link that the tables give to
    b alone). b receives at most one flow per stage, and that flow crosses one root-ward path of the
    tree, so b needs at least as many stages as there are own links with no other own link of b farther
    up the tree (no single path crosses two of them, and one path through each covers every own link
    below it, so for b this count is exact). A sender's uplink likewise needs a stage of its own, which
    gives the bound 1 whenever anything is routed. The bound is the largest count over all receivers;
    it ignores interactions between receivers (two receivers' paths competing for one shared link), so
    a plan may need more, never fewer.
    """
    owns = own_links(table)
    best, reason = _counting_bound(routing, table)
    lone = _lone_uplinks(routing, table)
    for j, routes in enumerate(table.routes):
        own = owns[j]
        lone_uplinks = lone.get(j, {})
        if len(own) <= 1 and not lone_uplinks:
            continue
        heads: set[int] = set()
        below: set[int] = set()
        for leaf, route in routes.items():
            mine = [link for link in route if link in own]
            if leaf in lone_uplinks:
                heads.update(lone_uplinks[leaf])
                below.update(mine)
            elif mine:
                heads.add(mine[0])
                below.update(mine[1:])
        need = len(heads - below)
        if need > best:
            names = ", ".join(routing.link_name(routing.links[i]) for i in sorted(heads - below)[:4])
            best, reason = need, (f"{routing.hcas[j].name} is the only receiver routed over {need} links that no "
                                  f"one path crosses together ({names}{', ...' if need > 4 else ''})")
    return best, reason


def _lone_uplinks(routing: Routing, table: RouteTable) -> dict[int, dict[int, list[int]]]:
    """Receiver index -> {leaf: uplinks of senders there whose only receiver it is} (tiny fabrics)."""
    up = uplink_index(routing)
    out: dict[int, dict[int, list[int]]] = {}
    for leaf, hs in table.senders.items():
        for h in hs:
            if table.reach[h.end] != 1:
                continue
            [j] = [j for j, routes in enumerate(table.routes) if leaf in routes and routing.hcas[j].host != h.host]
            out.setdefault(j, {}).setdefault(leaf, []).append(up[h.end])
    return out


def _counting_bound(routing: Routing, table: RouteTable) -> tuple[int, str]:
    """Each HCA sends (and receives) at most one flow a stage, so a stage burns at most the sum, over
    senders (or receivers), of the longest path that HCA's flows can take."""
    if not table.routed:
        return 0, "nothing is routed"
    longest_from_leaf: Counter[int] = Counter()
    by_receiver = 0
    for j, routes in enumerate(table.routes):
        dst = routing.hcas[j]
        longest = 0
        for leaf, route in routes.items():
            longest = max(longest, len(route) + 1)
            if len(route) + 1 > longest_from_leaf[leaf]:
                longest_from_leaf[leaf] = len(route) + 1
        by_receiver += longest if routes and dst else 0
    by_sender = sum(longest_from_leaf[leaf] * len(hs) for leaf, hs in table.senders.items())
    capacity = min(by_sender, by_receiver)
    need = max(1, -(-len(table.routed) // capacity))
    return need, (f"{len(table.routed)} routed links, and one stage's flows cross at most {capacity} links "
                  f"(each of the {len(routing.hcas)} HCAs sends and receives at most one flow)")


def own_links(table: RouteTable) -> list[frozenset[int]]:
    """Per receiver: the routed links that only routes to it cross."""
    first_dst: dict[int, int] = {}
    shared: set[int] = set()
    for j, union in enumerate(table.unions):
        for link in union:
            if first_dst.setdefault(link, j) != j:
                shared.add(link)
    return [union - shared for union in table.unions]


def make_plan(routing: Routing, max_stages: int = 64) -> Plan:
    table = route_table(routing)
    bound, why = lower_bound(routing, table)
    up = uplink_index(routing)
    owns = own_links(table)
    uncovered = set(table.routed)
    stages: list[tuple[Flow, ...]] = []
    while uncovered and len(stages) < max_stages:
        stage = _one_stage(routing, table, owns, up, uncovered)
        if not stage:
            break
        for flow in stage:
            uncovered.difference_update(flow.links)
        stages.append(tuple(stage))
    return Plan(routing, tuple(stages), bound, why, table.routed, tuple(sorted(uncovered)), table.unknown)


def _one_stage(routing: Routing, table: RouteTable, owns: list[frozenset[int]], up: dict[End, int],
               uncovered: set[int]) -> list[Flow]:
    busy: set[int] = set()
    sending: set[End] = set()
    # receivers with the most own links still to burn first: those links can only be burned through them
    order = sorted(range(len(table.routes)),
                   key=lambda j: (-len(uncovered.intersection(owns[j])),
                                  -len(uncovered.intersection(table.unions[j])), j))
    flows: list[Flow] = []
    for j in order:
        dst = routing.hcas[j]
        best: tuple[int, Hca, tuple[int, ...]] | None = None
        for leaf, route in table.routes[j].items():
            if not busy.isdisjoint(route):
                continue
            gain = len(uncovered.intersection(route))
            src = _free_sender(table.senders[leaf], dst, sending, up, uncovered)
            if src is None:
                continue
            total = gain + (up[src.end] in uncovered)
            if best is None or total > best[0]:
                best = (total, src, route)
                if total == len(route) + 1:
                    break
        if best is None or best[0] == 0:
            continue
        _, src, route = best
        links = (up[src.end], *route)
        flows.append(Flow(src, dst, links))
        busy.update(links)
        sending.add(src.end)
    return flows


def _free_sender(candidates: Sequence[Hca], dst: Hca, sending: set[End], up: dict[End, int],
                 uncovered: set[int]) -> Hca | None:
    fallback = None
    for h in candidates:
        if h.end in sending or h.host == dst.host:
            continue
        if up[h.end] in uncovered:
            return h
        if fallback is None:
            fallback = h
    return fallback


def plan_loads(plan: Plan) -> dict[int, list[int]]:
    """Link index -> flows it carries in each stage, recomputed from the tables for every flow."""
    routing = plan.routing
    index = {link: i for i, link in enumerate(routing.links)}
    up = uplink_index(routing)
    loads: dict[int, list[int]] = {i: [0] * len(plan.stages) for i in sorted(plan.routed)}
    for s, stage in enumerate(plan.stages):
        receivers: set[object] = set()
        senders: set[object] = set()
        for flow in stage:
            if flow.src.end in senders or flow.dst.end in receivers or flow.src.host == flow.dst.host:
                raise PlanError(f"stage {s + 1}: {flow.src.name} -> {flow.dst.name} breaks the one-flow-per-HCA "
                                "or different-hosts rule")
            senders.add(flow.src.end)
            receivers.add(flow.dst.end)
            path = flow_path(routing, flow.src, flow.dst, up)
            if isinstance(path, Unknown):
                raise PlanError(f"stage {s + 1}: {flow.src.name} -> {flow.dst.name}: {path.reason}")
            for link in path:
                row = loads.setdefault(index[link], [0] * len(plan.stages))
                row[s] += 1
                if row[s] > 1:
                    raise PlanError(f"stage {s + 1} would put {row[s]} flows on {routing.link_name(link)}")
    return loads


def excluded_lines(excluded: Sequence[Excluded]) -> list[str]:
    return [f"{e.what}: {e.reason}" for e in excluded]


def retry_stages(routing: Routing, targets: set[int], avoid: set[int], max_stages: int = 8,
                 ) -> tuple[list[tuple[Flow, ...]], set[int]]:
    """Stages that burn `targets` again without crossing `avoid` (links that failed: flows through them are
    slowed, so they prove nothing about the rest of their path); and the targets no such flow reaches."""
    table = route_table(routing)
    up = uplink_index(routing)
    routes = tuple({leaf: r for leaf, r in rs.items() if avoid.isdisjoint(r)} for rs in table.routes)
    senders = {leaf: tuple(h for h in hs if up[h.end] not in avoid) for leaf, hs in table.senders.items()}
    unions = tuple(frozenset().union(*r.values()) for r in routes)
    narrowed = RouteTable(routes, unions, senders, table.reach, table.routed, table.unknown)
    owns = own_links(narrowed)
    uncovered = set(targets)
    stages: list[tuple[Flow, ...]] = []
    while uncovered and len(stages) < max_stages:
        stage = [f for f in _one_stage(routing, narrowed, owns, up, uncovered) if avoid.isdisjoint(f.links)]
        gained = uncovered & {link for f in stage for link in f.links}
        if not stage or not gained:
            break
        uncovered -= gained
        stages.append(tuple(stage))
    return stages, uncovered
