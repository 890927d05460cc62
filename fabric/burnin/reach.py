"""Every receiver's routes at once: the forwarding tables as per-switch arrays and per-link receiver sets.

`reach(routing)` reads, for every switch, the out-port of every taking-part HCA's LID (one `bytes` per
switch, indexed by receiver), and propagates sets of receivers as Python integers used as bit sets (bit j:
receiver `routing.hcas[j]`): `good[X]`, the receivers whose route from switch X reaches them (computed
backwards from their leaves), then `users[link]`, the receivers some sender's route carries over that
link (forwards from the senders' leaves). A link is *routed* when some known route crosses it, as
`fabric.burnin.plan` has always counted it; a route that meets a switch without a table, a missing entry,
a port with no link or a loop is unknown, with its reason (walked one by one: there are few).

A path is then a walk of at most a few hops through `ports` and `hops`, no per-pair table is built: at
4,000 HCAs and 220 leaves that table alone took seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from fabric.burnin.lft import NO_PORT
from fabric.burnin.routes import Routing, RoutingError, Unknown, route_from, uplink_index
from fabric.topology import End

_Hop = tuple[int, int, End]  # link index, next switch index (-1: the link reaches an HCA), far end


def bits(mask: int) -> list[int]:
    """The receivers in a bit set, ascending."""
    text = bin(mask)[:1:-1]
    out: list[int] = []
    at = text.find("1")
    while at >= 0:
        out.append(at)
        at = text.find("1", at + 1)
    return out


@dataclass(frozen=True)
class Reach:
    routing: Routing = field(repr=False)
    host: tuple[int, ...]  # HCA -> host number
    leaf: tuple[int, ...]  # HCA -> its leaf's switch index
    up: tuple[int, ...]  # HCA -> its uplink (hca-leaf link index)
    down: tuple[int, ...]  # HCA -> the link into it (leaf-hca link index)
    senders: dict[int, tuple[int, ...]]  # leaf switch index -> HCAs cabled to it
    ports: tuple[bytes, ...] = field(repr=False)  # switch -> out-port per receiver (NO_PORT: none)
    hops: tuple[dict[int, _Hop], ...] = field(repr=False)  # switch -> out-port -> hop
    start: dict[int, int] = field(repr=False)  # sending leaf -> receivers with a known route from it
    users: dict[int, int] = field(repr=False)  # routed link -> receivers routed over it
    through: tuple[int, ...] = field(repr=False)  # switch -> receivers some known route passes through
    sets: tuple[dict[int, int], ...] = field(repr=False)  # switch -> out-port -> receivers forwarded there
    reach: tuple[int, ...]  # HCA -> how many receivers it can send to
    routed: frozenset[int]
    unknown: tuple[tuple[str, int], ...]  # (reason, flows)

    def path(self, leaf: int, j: int) -> tuple[int, ...]:
        """Links from `leaf` to receiver j (known route: j in start[leaf])."""
        out: list[int] = []
        x, ports, hops = leaf, self.ports, self.hops
        while True:
            link, nxt, _ = hops[x][ports[x][j]]
            out.append(link)
            if nxt < 0:
                return tuple(out)
            x = nxt


def _port_sets(table: bytes) -> dict[int, int]:
    """Out-port -> bit set of the receivers forwarded out of it (the bytes as a binary numeral: C speed)."""
    out: dict[int, int] = {}
    for port in set(table):
        flags = bytearray(b"0" * 256)
        flags[port] = ord("1")
        out[port] = int(table.translate(flags)[::-1], 2)
    return out


def reach(routing: Routing) -> Reach:
    hcas = routing.hcas
    n = len(hcas)
    hosts: dict[str, int] = {}
    host = tuple(hosts.setdefault(h.host, len(hosts)) for h in hcas)
    leaf = tuple(routing.switch_index[h.leaf.guid] for h in hcas)
    ups = uplink_index(routing)
    up = tuple(ups[h.end] for h in hcas)
    into = {lk.head: i for i, lk in enumerate(routing.links) if lk.kind == "leaf-hca"}
    down = tuple(into[h.end] for h in hcas)
    at = {h.end: j for j, h in enumerate(hcas)}
    senders: dict[int, list[int]] = {}
    for i, x in enumerate(leaf):
        senders.setdefault(x, []).append(i)
    lids = [h.lid for h in hcas]
    pick = itemgetter(*lids) if n > 1 else (lambda t: tuple(t[lid] for lid in lids))
    ports: list[bytes] = []
    for table in routing.tables:
        if table is None or n == 0:
            ports.append(bytes([NO_PORT]) * n)
        else:
            padded = table + bytes([NO_PORT]) * max(0, max(lids) + 1 - len(table))
            ports.append(bytes(pick(padded)))
    hops = tuple(dict(h) for h in routing.hops)
    sets = [_port_sets(p) for p in ports]
    good = _good(n, hops, sets, at)
    everyone = (1 << n) - 1
    host_bits = [0] * len(hosts)
    for j, h in enumerate(host):
        host_bits[h] |= 1 << j
    start: dict[int, int] = {}
    for x, hs in senders.items():
        hs_hosts = {host[i] for i in hs}
        # every HCA on this leaf is on one host: it sends to no HCA of that host
        start[x] = everyone & ~host_bits[hs_hosts.pop()] if len(hs_hosts) == 1 else everyone
    users, through = _users(hops, sets, good, start)
    unknown = _unknown(routing, senders, host, start, good)
    reachable = {x: (start[x] & good[x]) for x in senders}
    reach_n = tuple((reachable[leaf[i]] & ~host_bits[host[i]]).bit_count() for i in range(n))
    routed = set(users) | {up[i] for i in range(n) if reach_n[i] > 0}
    return Reach(routing, host, leaf, up, down, {x: tuple(v) for x, v in senders.items()}, tuple(ports), hops,
                 reachable, users, tuple(through), tuple(sets), reach_n, frozenset(routed), unknown)


def _good(n: int, hops: Sequence[dict[int, _Hop]], sets: Sequence[dict[int, int]], at: dict[End, int],
          ) -> list[int]:
    """Switch -> receivers whose route from it reaches them (backwards from their leaves)."""
    good = [0] * len(hops)
    for x, hop in enumerate(hops):
        for port, (_link, nxt, head) in hop.items():
            if nxt < 0 and head in at and (sets[x].get(port, 0) >> at[head]) & 1:
                good[x] |= 1 << at[head]
    changed = True
    while changed:
        changed = False
        for x, hop in enumerate(hops):
            gained = good[x]
            for port, (_link, nxt, _head) in hop.items():
                if nxt >= 0 and port in sets[x]:
                    gained |= sets[x][port] & good[nxt]
            if gained != good[x]:
                good[x], changed = gained, True
    return good


def _users(hops: Sequence[dict[int, _Hop]], sets: Sequence[dict[int, int]], good: Sequence[int],
           start: dict[int, int]) -> tuple[dict[int, int], list[int]]:
    """Link -> receivers some known route carries over it (forwards from the sending leaves, in rounds:
    one a hop, so each switch passes on all it received in that round at once)."""
    pending = [0] * len(hops)
    for x, mask in start.items():
        pending[x] = mask & good[x]
    seen = [0] * len(hops)
    users: dict[int, int] = {}
    work = set(start)
    while work:
        arriving: set[int] = set()
        for x in work:
            new = pending[x] & ~seen[x]
            pending[x] = 0
            if not new:
                continue
            seen[x] |= new
            hop = hops[x]
            for port, receivers in sets[x].items():
                flow = new & receivers
                if not flow or port not in hop:
                    continue
                link, nxt, _head = hop[port]
                users[link] = users.get(link, 0) | flow
                if nxt >= 0:
                    pending[nxt] |= flow
                    arriving.add(nxt)
        work = arriving
    return users, seen


def routed_from(r: Reach, leaf: int) -> dict[int, int]:
    """Link -> receivers routed over it from `leaf` (its senders' routes alone)."""
    return _users(r.hops, r.sets, [-1] * len(r.hops), {leaf: r.start.get(leaf, 0)})[0]


def _unknown(routing: Routing, senders: dict[int, list[int]], host: Sequence[int], start: dict[int, int],
             good: Sequence[int]) -> tuple[tuple[str, int], ...]:
    counts: Counter[str] = Counter()
    for x, hs in senders.items():
        bad = start[x] & ~good[x]
        if not bad:
            continue
        memo: dict[int, tuple[int, ...] | Unknown] = {}
        for j in bits(bad):
            memo.clear()
            route = route_from(routing, x, routing.hcas[j], memo)
            if not isinstance(route, Unknown):
                raise RoutingError(f"route to {routing.hcas[j].name} from switch {x}: known when walked, "
                                   "unknown as a set: report this")
            counts[route.reason] += sum(1 for i in hs if host[i] != host[j])
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
