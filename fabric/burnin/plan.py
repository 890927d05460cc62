"""Burn-in stages from the real forwarding tables: every routed directed link carries one flow, at full rate.

A stage is a set of HCA-to-HCA flows in which each HCA sends at most one flow and receives at most one,
no flow joins two HCAs of one host, and no directed link carries two flows (so each runs at line rate).
Over all stages every directed link that some HCA-to-HCA route crosses (`routed`) carries a flow at
least once. Links no route crosses are `not_routed`: no data traffic uses them under this routing, so no
burn-in can reach them until the routing changes.

Planning (`make_plan`) reads every receiver's routes at once (`reach`), proves the fewest stages any
plan needs with its witness (`bound`), and searches for a plan with that many (`search`: scarcest links
first, then repair by local search); when it needs more, the plan names the links that forced them.
`plan_loads` then recomputes every flow's path from the tables and refuses a plan in which a link
carries two flows in one stage: never a silent overload. `retry_stages` (a few links again, around
failed ones) keeps the per-stage greedy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from fabric.burnin.bound import Witness, lower_bound
from fabric.burnin.reach import reach
from fabric.burnin.routes import Hca, Routing, RoutingError, Unknown, flow_path, route_from, uplink_index
from fabric.burnin.search import search
from fabric.topology import End


class BurninPlanError(RoutingError):
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
    witness: Witness | None = None  # the links and HCAs that prove the lower bound
    forced: tuple[int, ...] = ()  # links no plan found fitted in lower_bound stages (empty at the bound)

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


def own_links(table: RouteTable) -> list[frozenset[int]]:
    """Per receiver: the routed links that only routes to it cross."""
    first_dst: dict[int, int] = {}
    shared: set[int] = set()
    for j, union in enumerate(table.unions):
        for link in union:
            if first_dst.setdefault(link, j) != j:
                shared.add(link)
    return [union - shared for union in table.unions]


# The per-stage greedy (the planner before issue #41) reaches the bound on regular fat trees where the
# search does not (Imbue's size under ftree: 2 stages, the search 4 or 5), but walks every (leaf,
# receiver) route: it is tried first, for the bound's stages only, where that costs a few seconds (HCAs x
# sending leaves x (stages + 1) under this; Imbue's size under ftree 1.6 M, 2.1 M under updn where it
# fails, Selene's GPU hosts 2.4-3.2 M).
GREEDY_WORK = 1_800_000


def make_plan(routing: Routing, max_stages: int = 64) -> Plan:
    r = reach(routing)
    bound = lower_bound(r)
    if len(routing.hcas) * len(r.senders) * (bound.stages + 1) <= GREEDY_WORK:
        greedy = _greedy(routing, bound.stages)
        if greedy is not None:
            return Plan(routing, greedy, bound.stages, bound.reason, r.routed, (), r.unknown, bound.witness)
    found = search(r, bound.stages, max_stages=max_stages)
    hcas = routing.hcas
    stages = tuple(tuple(Flow(hcas[i], hcas[j], links) for i, j, links in stage) for stage in found.stages)
    return Plan(routing, stages, bound.stages, bound.reason, r.routed, found.uncovered, r.unknown, bound.witness,
                found.forced)


def _greedy(routing: Routing, limit: int) -> tuple[tuple[Flow, ...], ...] | None:
    """The per-stage greedy's plan if it burns every routed link in at most `limit` stages."""
    table = route_table(routing)
    owns, up = own_links(table), uplink_index(routing)
    uncovered = set(table.routed)
    stages: list[tuple[Flow, ...]] = []
    while uncovered and len(stages) < limit:
        stage = _one_stage(routing, table, owns, up, uncovered)
        if not stage:
            return None
        for flow in stage:
            uncovered.difference_update(flow.links)
        stages.append(tuple(stage))
    return None if uncovered else tuple(stages)


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
                raise BurninPlanError(f"stage {s + 1}: {flow.src.name} -> {flow.dst.name} breaks the one-flow-per-HCA "
                                "or different-hosts rule")
            senders.add(flow.src.end)
            receivers.add(flow.dst.end)
            path = flow_path(routing, flow.src, flow.dst, up)
            if isinstance(path, Unknown):
                raise BurninPlanError(f"stage {s + 1}: {flow.src.name} -> {flow.dst.name}: {path.reason}")
            for link in path:
                row = loads.setdefault(index[link], [0] * len(plan.stages))
                row[s] += 1
                if row[s] > 1:
                    raise BurninPlanError(f"stage {s + 1} would put {row[s]} flows on {routing.link_name(link)}")
    return loads


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
