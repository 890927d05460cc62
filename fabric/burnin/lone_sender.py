"""The lower bound of a leaf with few senders: links only its routes cross, no one route crossing two.

A link whose every route starts at one leaf L (no flow from another leaf crosses it) can only be burned
by L's k senders, one flow each a stage. Links of that kind whose receivers (those routed over them) are
pairwise disjoint cannot share a flow: L's route to a receiver is unique, so a flow crosses at most one of
them. So |P| such links need ceil(|P| / k) stages. The pod bounds miss it when these links lie outside
every pod the routes do not cross (a lone HCA on its leaf routed down through one spine to three leaves
that other leaves reach through other spines), or when L's pod is crossed by routes.

Which links have one leaf as their only source: receivers are propagated from every sending leaf as pairs
of bit sets, (one leaf, two or more leaves) routed to them so far (a route to a receiver from one leaf
is unique, so arrivals at a switch from different rounds come from different leaves and add up).
"""

from __future__ import annotations

from fabric.burnin.reach import Reach, routed_from

MAX_SENDERS = 2  # leaves with more senders than this are not worked out (a bound of |P| / k rarely wins)
MAX_LEAVES = 64  # nor more than this many leaves (each is one walk of its routes)


def _merge(once: int, many: int, add_once: int, add_many: int) -> tuple[int, int]:
    both = many | add_many | (once & add_once)
    return (once | add_once) & ~both, both


def shared_links(r: Reach) -> dict[int, int]:
    """Link -> receivers routed over it from two or more leaves."""
    n = len(r.hops)
    pending: list[tuple[int, int]] = [(0, 0)] * n
    for x, mask in r.start.items():
        pending[x] = (mask, 0)
    once_at, many_at = [0] * n, [0] * n  # receivers forwarded through each switch so far, from one / 2+ leaves
    once_link: dict[int, int] = {}
    many_link: dict[int, int] = {}
    work = set(r.start)
    while work:
        arriving: set[int] = set()
        for x in work:
            once, many = pending[x]
            pending[x] = (0, 0)
            once &= ~many_at[x]  # two leaves' routes to these passed x already: every link onward knows it
            many &= ~many_at[x]
            if not once | many:
                continue
            once_at[x], many_at[x] = _merge(once_at[x], many_at[x], once, many)
            hop = r.hops[x]
            for port, receivers in r.sets[x].items():
                fo, fm = once & receivers, many & receivers
                if not fo | fm or port not in hop:
                    continue
                link, y, _head = hop[port]
                o, m = _merge(once_link.get(link, 0), many_link.get(link, 0), fo, fm)
                once_link[link], many_link[link] = o, m
                if y >= 0:
                    pending[y] = _merge(*pending[y], fo, fm)
                    arriving.add(y)
        work = arriving
    return {link: m for link, m in many_link.items() if m}


def lone_sender_bound(r: Reach, floor: int = 1) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    """(stages, links, senders, leaf) of the leaf with few senders whose own links need the most stages;
    stages 0 when no such leaf beats `floor`."""
    leaves = sorted(((x, tuple(i for i in hs if r.reach[i] > 0)) for x, hs in r.senders.items()),
                    key=lambda item: (len(item[1]), item[0]))
    leaves = [(x, hs) for x, hs in leaves if 0 < len(hs) <= MAX_SENDERS][:MAX_LEAVES]
    if not leaves:
        return 0, (), (), -1
    shared = shared_links(r)
    best: tuple[int, tuple[int, ...], tuple[int, ...], int] = (0, (), (), -1)
    for x, hs in leaves:
        own = [(flow.bit_count(), link, flow) for link, flow in routed_from(r, x).items()
               if flow == r.users.get(link) and not shared.get(link, 0) & flow]
        packed: list[int] = []
        taken = 0
        for _n, link, flow in sorted(own):
            if not flow & taken:
                packed.append(link)
                taken |= flow
        need = -(-len(packed) // len(hs))
        if need > max(best[0], floor):
            best = (need, tuple(sorted(packed)), hs, x)
    return best
