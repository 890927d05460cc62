"""The fewest stages any burn-in plan needs under these forwarding tables, and the links that force it.

Each HCA sends at most one flow a stage and receives at most one, so a set of routed links G that only
the flows into a set of receivers R can cross, each such flow crossing at most one link of G, needs at
least ceil(|G| / |R|) stages (likewise with senders). Such groups, from the fabric's shape:

- *into* a pod: the routed links entering a connected group of switches of tier <= t (t = 1: one leaf;
  t = 2 in a 3-tier SuperPOD: a scalable unit's rail plane, its leaves and spines). When no route enters
  the pod and leaves it again (checked on every route, as bit sets), a flow enters it at most once and
  ends inside, so R is the receivers the tables route over those links; and finer, any subset of those
  links whose users are few (`hall`: the links matched to (receiver, stage) slots, a stage more until
  every link has one; the subset that forced the last stage is the witness);
- *out of* such a pod: the routed links leaving it, which only its own HCAs can send over;
- one receiver's *own* links (no other receiver's route crosses them): the routes into it form a tree, and
  the own links with no own link farther up cannot share a path, so it needs a stage for each;
- *from* a leaf with one or two senders: links only its routes cross, pairwise routed to different
  receivers, so no flow crosses two (`fabric.burnin.lone_sender`).

The bound is the largest of them, with its witness: the group, its links and its HCAs. Tiers are hop
counts from the HCAs (a leaf is tier 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric.burnin.lone_sender import lone_sender_bound
from fabric.burnin.reach import Reach, bits
from fabric.topology import NodeType


@dataclass(frozen=True)
class Witness:
    kind: str  # into, out_of, own, from, any
    links: tuple[int, ...]  # the group's routed links
    hcas: tuple[int, ...]  # the receivers (into, own) or senders (out_of, from) that alone can cross them
    switches: tuple[int, ...]  # the pod (into, out_of), the senders' leaf (from)


@dataclass(frozen=True)
class Bound:
    stages: int
    reason: str
    witness: Witness | None


def tiers(r: Reach) -> list[int]:
    """Switch index -> hop count from the nearest HCA (1 for a leaf); 0 for a switch no HCA reaches."""
    routing = r.routing
    top = routing.topology
    index = routing.switch_index
    tier = [0] * len(routing.switch_guids)
    frontier: list[int] = []
    for guid, node in top.nodes.items():
        if node.type is NodeType.SWITCH or node.is_aggregation_node:
            continue
        for _port, peer in top.adjacency.get(guid, []):
            x = index.get(peer.guid)
            if x is not None and not tier[x]:
                tier[x] = 1
                frontier.append(x)
    while frontier:
        nxt = []
        for x in frontier:
            for _link, y, _head in r.hops[x].values():
                if y >= 0 and not tier[y]:
                    tier[y] = tier[x] + 1
                    nxt.append(y)
        frontier = nxt
    return tier


def _pods(r: Reach, tier: list[int], t: int) -> list[list[int]]:
    parent = list(range(len(tier)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, hop in enumerate(r.hops):
        if not 0 < tier[x] <= t:
            continue
        for _link, y, _head in hop.values():
            if y >= 0 and 0 < tier[y] <= t:
                parent[find(x)] = find(y)
    pods: dict[int, list[int]] = {}
    for x in range(len(tier)):
        if 0 < tier[x] <= t:
            pods.setdefault(find(x), []).append(x)
    return list(pods.values())


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0


def pod_bounds(r: Reach, tier: list[int], floor: int = 1) -> list[tuple[int, Witness]]:
    """(stages, witness) for the links into and out of every pod at every tier that no route crosses
    (enters, then leaves): through such a pod a flow enters at most once and ends inside, or starts inside
    and leaves at most once. Stage counts below `floor` are not worked out."""
    out: list[tuple[int, Witness]] = []
    incoming: list[list[tuple[int, int]]] = [[] for _ in r.hops]  # switch -> (from switch, link)
    for w, hop in enumerate(r.hops):
        for link, y, _head in hop.values():
            if y >= 0 and link in r.users:
                incoming[y].append((w, link))
    for t in range(1, max(tier, default=0)):
        for pod in _pods(r, tier, t):
            inside = set(pod)
            into = [link for x in pod for w, link in incoming[x] if w not in inside]
            out_of = [(x, port, link) for x in pod for port, (link, y, _h) in r.hops[x].items()
                      if y >= 0 and y not in inside and link in r.users]
            if (not into and not out_of) or _crossed(r, pod, inside, incoming, out_of):
                continue
            if into:
                need, links, receivers = hall(into, {link: bits(r.users[link]) for link in into}, floor)
                out.append((need, Witness("into", links, receivers, tuple(pod))))
            if out_of:
                senders = tuple(i for x in pod for i in r.senders.get(x, ()) if r.reach[i] > 0)
                out.append((_ceil(len(out_of), len(senders)),
                            Witness("out_of", tuple(sorted(lk for _x, _p, lk in out_of)), senders, tuple(pod))))
    return out


def _crossed(r: Reach, pod: list[int], inside: set[int], incoming: list[list[tuple[int, int]]],
             out_of: list[tuple[int, int, int]]) -> bool:
    """Whether some route enters the pod and then leaves it."""
    entered = dict.fromkeys(pod, 0)
    for x in pod:
        for w, link in incoming[x]:
            if w not in inside:
                entered[x] |= r.users[link]
    changed = True
    while changed:
        changed = False
        for x in pod:
            if not entered[x]:
                continue
            for port, (_link, y, _h) in r.hops[x].items():
                if y in inside:
                    add = entered[x] & r.sets[x].get(port, 0)
                    if add & ~entered[y]:
                        entered[y] |= add
                        changed = True
    return any(entered[x] & r.sets[x].get(port, 0) for x, port, _link in out_of)


def hall(links: list[int], users: dict[int, list[int]], floor: int = 1) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """The fewest stages in which each of `links` gets a flow of its own into one of its `users` (each
    receiver taking one flow a stage, every flow crossing one of the links): a matching of links to
    (receiver, stage) slots, grown one stage at a time. Returns it, with the group that forced the last
    stage: links all of whose users are already full (Hall's condition fails on them), and those users.
    The search starts at `floor` stages (a bound already known): fewer are never worked out."""
    holders: dict[int, list[int]] = {}
    k = max(1, floor)
    group: tuple[tuple[int, ...], tuple[int, ...]] = (tuple(sorted(links)), ())

    def augment(link: int, seen: set[int], visited: list[int]) -> bool:
        visited.append(link)
        for j in users[link]:
            if j in seen:
                continue
            seen.add(j)
            held = holders.setdefault(j, [])
            if len(held) < k:
                held.append(link)
                return True
            for i, other in enumerate(held):
                if augment(other, seen, visited):
                    held[i] = link
                    return True
        return False

    waiting = sorted(links, key=lambda lk: len(users[lk]))
    while waiting:
        left = []
        for link in waiting:
            seen: set[int] = set()
            visited: list[int] = []
            if not augment(link, seen, visited):
                left.append(link)
                group = (tuple(sorted(set(visited))), tuple(sorted(seen)))
        if left:
            k += 1
        waiting = left
    return k, group[0], group[1] or tuple(sorted({j for lk in links for j in users[lk]}))


def own_bound(r: Reach) -> tuple[int, Witness | None]:
    """The receiver with the most own links that no one path can cross together."""
    links = r.routing.links
    index = r.routing.switch_index
    own = {link: users for link, users in r.users.items() if users.bit_count() == 1}
    crossed = [0] * len(r.hops)  # receivers that crossed one of their own links before this switch
    changed = True
    while changed:
        changed = False
        for x, hop in enumerate(r.hops):
            for port, receivers in r.sets[x].items():
                h = hop.get(port)
                if h is None or h[1] < 0:
                    continue
                add = (crossed[x] & receivers & r.through[x]) | own.get(h[0], 0)
                if add & ~crossed[h[1]]:
                    crossed[h[1]] |= add
                    changed = True
    heads: dict[int, set[int]] = {}
    for link, users in own.items():
        x = index.get(links[link].tail.guid, -1)
        if x >= 0 and not crossed[x] & users:
            heads.setdefault(users.bit_length() - 1, set()).add(link)
    # a sender that can reach only one receiver: its uplink too is that receiver's alone (tiny fabrics)
    for leaf, hs in r.senders.items():
        for i in hs:
            if r.reach[i] != 1:
                continue
            [j] = [j for j in bits(r.start[leaf]) if r.host[j] != r.host[i]]
            mine = heads.setdefault(j, set())
            mine.difference_update(r.path(leaf, j))
            mine.add(r.up[i])
    if not heads:
        return 0, None
    j = max(heads, key=lambda k: (len(heads[k]), -k))
    return len(heads[j]), Witness("own", tuple(sorted(heads[j])), (j,), ())


def lower_bound(r: Reach) -> Bound:
    if not r.routed:
        return Bound(0, "nothing is routed", None)
    best = Bound(1, "every routed link needs a flow", Witness("any", (), (), ()))
    n, w = own_bound(r)
    if n > best.stages and w is not None:
        best = Bound(n, describe(r, n, w), w)
    for n, w in pod_bounds(r, tiers(r), best.stages):
        if n > best.stages:
            best = Bound(n, describe(r, n, w), w)
    n, links, senders, leaf = lone_sender_bound(r, best.stages)
    if n > best.stages:
        w = Witness("from", links, senders, (leaf,))
        best = Bound(n, describe(r, n, w), w)
    return best


def describe(r: Reach, n: int, w: Witness) -> str:
    routing = r.routing
    names = routing.names
    hcas = [routing.hcas[i].name for i in w.hcas]
    rails = {name.split("/", 1)[-1] for name in hcas}
    rail = f" (all on {rails.pop()})" if len(rails) == 1 and len(hcas) > 1 else ""
    who = ", ".join(hcas[:3]) + (", ..." if len(hcas) > 3 else "")
    if w.kind == "own":
        shown = ", ".join(routing.link_name(routing.links[i]) for i in w.links[:4])
        return (f"{hcas[0]} is the only receiver routed over {len(w.links)} links that no one path crosses "
                f"together ({shown}{', ...' if len(w.links) > 4 else ''})")
    if w.kind == "from":
        shown = ", ".join(routing.link_name(routing.links[i]) for i in w.links[:3])
        leaf = names[routing.switch_guids[w.switches[0]]]
        whose = f"{leaf}'s sender {who} sends" if len(hcas) == 1 else f"{leaf}'s {len(hcas)} senders ({who}) send"
        return (f"{n - 1} stage{'s' if n > 2 else ''} cannot cover {len(w.links)} routed links that only {whose} "
                f"over, no one route crossing two ({shown}{', ...' if len(w.links) > 3 else ''})")
    pod = sorted(names[routing.switch_guids[x]] for x in w.switches)
    where = pod[0] if len(pod) == 1 else f"the pod of {len(pod)} switches {', '.join(pod[:3])}, ..."
    if w.kind == "into":
        return (f"{n - 1} stage{'s' if n > 2 else ''} cannot cover the {len(w.links)} routed links into {where}: "
                f"only {len(hcas)} receivers{rail} are routed over them ({who}), one flow each a stage")
    return (f"{n - 1} stage{'s' if n > 2 else ''} cannot cover the {len(w.links)} routed links out of {where}: "
            f"only {len(hcas)} HCAs{rail} can send over them ({who}), one flow each a stage")
