"""Stages that burn every routed link, searched for at the lower bound: scarcest links first, then repair.

With K stages (the lower bound first), links are taken scarcest first (fewest receivers routed over
them): each gets the flow, in any stage where it fits with no collision (its sender, its receiver and
every link of its path free), that burns the most links not yet burned. What is left is repaired by
local search: a flow that burns an unburned link is inserted anyway, and the flows it collides with are
evicted, choosing the insertion that leaves the fewest links unburned; evicted flows' links go back to
the queue. If some links still cannot be burned, a stage is added for them: they are the links that
forced it, and the plan names them.

Each HCA sends and receives at most one flow a stage, never to its own host; no link carries two flows
in one stage (`plan.plan_loads` re-checks every flow against the tables).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from fabric.burnin.reach import Reach, bits

_FLAG = bytes.maketrans(b"01", b"\0\1")


@dataclass(frozen=True)
class Found:
    stages: tuple[tuple[tuple[int, int, tuple[int, ...]], ...], ...]  # (sender, receiver, links) per stage
    forced: tuple[int, ...]  # links no search fitted in the bound's stages (empty when it was reached)
    uncovered: tuple[int, ...]  # routed links no stage burns (no known flow reaches them)


class _Search:
    def __init__(self, r: Reach, k: int, seed: int) -> None:
        self.r = r
        self.n = len(r.host)
        self.rng = random.Random(seed)
        self.k = 0
        self.send: list[list[int]] = []
        self.recv: list[list[int]] = []
        self.owner: list[dict[int, int]] = []
        self.flows: list[tuple[int, int, int, tuple[int, ...]] | None] = []
        self.cover: dict[int, int] = dict.fromkeys(r.routed, 0)
        self.incoming: list[list[tuple[int, int]]] = [[] for _ in r.hops]  # switch -> (from, its port)
        for w, hop in enumerate(r.hops):
            for port, (_link, y, _head) in hop.items():
                if y >= 0:
                    self.incoming[y].append((w, port))
        self.tail: dict[int, int] = {}
        for x, hop in enumerate(r.hops):
            for _port, (link, _y, _head) in hop.items():
                self.tail[link] = x
        self.sender_of = {link: i for i, link in enumerate(r.up)}
        self.receiver_of = {link: j for j, link in enumerate(r.down)}
        # sending leaf -> per receiver 1 when it has a known route to it (bytes: indexing a big int is slow)
        self.starts = {x: bin(mask)[:1:-1].ljust(self.n, "0").encode().translate(_FLAG) for x, mask in r.start.items()}
        self.leaves = sorted(self.starts)
        self.paths: dict[int, tuple[int, ...]] = {}
        self.protected: dict[int, int] = {}  # flow -> until which repair it may not be evicted
        self.round = 0
        self.used = 0  # repairs made
        for _ in range(k):
            self.add_stage()

    def add_stage(self) -> None:
        self.k += 1
        self.send.append([-1] * self.n)
        self.recv.append([-1] * self.n)
        self.owner.append({})

    # flows -------------------------------------------------------------------------------------------
    def place(self, s: int, i: int, j: int, links: tuple[int, ...]) -> None:
        fid = len(self.flows)
        self.flows.append((s, i, j, links))
        self.send[s][i] = self.recv[s][j] = fid
        owner = self.owner[s]
        for link in links:
            owner[link] = fid
            self.cover[link] += 1

    def evict(self, fid: int) -> list[int]:
        flow = self.flows[fid]
        assert flow is not None
        s, i, j, links = flow
        self.flows[fid] = None
        self.send[s][i] = self.recv[s][j] = -1
        owner, lost = self.owner[s], []
        for link in links:
            del owner[link]
            self.cover[link] -= 1
            if not self.cover[link]:
                lost.append(link)
        return lost

    def collisions(self, s: int, i: int, j: int, links: tuple[int, ...]) -> set[int]:
        out = {f for f in (self.send[s][i], self.recv[s][j]) if f >= 0}
        owner = self.owner[s]
        for link in links:
            f = owner.get(link, -1)
            if f >= 0:
                out.add(f)
        return out

    def gain(self, links: tuple[int, ...]) -> int:
        cover = self.cover
        return sum(1 for link in links if not cover[link])

    def loss(self, fids: set[int], keep: tuple[int, ...]) -> int:
        """Links that evicting `fids` would leave unburned (those `keep` burns again excepted)."""
        lost = 0
        for fid in fids:
            flow = self.flows[fid]
            assert flow is not None
            for link in flow[3]:
                if self.cover[link] == 1 and link not in keep:
                    lost += 1
        return lost

    # candidates --------------------------------------------------------------------------------------
    def path(self, leaf: int, j: int) -> tuple[int, ...]:
        key = leaf * self.n + j
        got = self.paths.get(key)
        if got is None:
            got = self.paths[key] = self.r.path(leaf, j)
        return got

    def sources(self, link: int, j: int, want: int, depth: int) -> list[int]:
        """Up to `want` sending leaves whose route to receiver j crosses `link` (a switch's out-link), back
        from the link through the switches that forward j's LID towards it, nearest first, no more than
        `depth` switches back (-1: any)."""
        starts, ports, incoming = self.starts, self.r.ports, self.incoming
        x = self.tail[link]
        seen, level, out, d = {x}, [x], [], 0
        while level:
            nxt = []
            for y in level:
                if y in starts and starts[y][j]:
                    out.append(y)
                    if len(out) >= want:
                        return out
                if d == depth:
                    continue
                for w, port in incoming[y]:
                    if ports[w][j] == port and w not in seen:
                        seen.add(w)
                        nxt.append(w)
            level, d = nxt, d + 1
        return out

    def candidates(self, link: int, limit: int) -> list[tuple[int, int, int]]:
        """(sender or -1 for any on the leaf, leaf, receiver) whose route crosses `link`, at most `limit`."""
        r = self.r
        if link in self.sender_of:
            i = self.sender_of[link]
            pool = [j for j in bits(r.start[r.leaf[i]]) if r.host[j] != r.host[i]]
            return [(i, r.leaf[i], j) for j in self.rng.sample(pool, min(limit, len(pool)))]
        if link in self.receiver_of:
            j = self.receiver_of[link]
            leaves = [x for x, flags in self.starts.items() if flags[j]]
            return [(-1, x, j) for x in self.rng.sample(leaves, min(limit, len(leaves)))]
        receivers = bits(r.users.get(link, 0))
        self.rng.shuffle(receivers)
        out: list[tuple[int, int, int]] = []
        for depth in (2, -1):  # the near sources of every receiver before the far ones of any
            for j in receivers:
                out += [(-1, x, j) for x in self.sources(link, j, 3, depth)]
                if len(out) >= limit:
                    break
            if out:
                break
        self.rng.shuffle(out)
        return out[:limit]

    def sender(self, s: int, leaf: int, j: int, busy_too: bool = False) -> int:
        """A free sender on `leaf` in stage s, not on j's host (one whose uplink is unburned first); with
        `busy_too`, a busy one when none is free."""
        r, send, best, busy = self.r, self.send[s], -1, []
        for i in r.senders[leaf]:
            if r.host[i] == r.host[j] or not r.reach[i]:
                continue
            if send[i] >= 0:
                busy.append(i)
                continue
            if not self.cover[r.up[i]]:
                return i
            if best < 0:
                best = i
        if best < 0 and busy_too and busy:
            best = self.rng.choice(busy)
        return best

    def fit(self, link: int, limit: int) -> bool:
        """Place the collision-free flow through `link` that burns the most unburned links."""
        r, best = self.r, None
        for fixed, leaf, j in self.candidates(link, limit):
            path = self.path(leaf, j)
            for s in range(self.k):
                owner = self.owner[s]
                if self.recv[s][j] >= 0 or any(lk in owner for lk in path):
                    continue
                # a free sender's uplink is free too: only its own flows cross it
                i = (fixed if self.send[s][fixed] < 0 else -1) if fixed >= 0 else self.sender(s, leaf, j)
                if i < 0:
                    continue
                links = (r.up[i], *path)
                g = self.gain(links)
                if best is None or g > best[0]:
                    best = (g, s, i, j, links)
        if best is None:
            return False
        self.place(*best[1:])
        return True

    def repair(self, link: int, limit: int) -> list[int]:
        """Insert a flow through `link`, evicting what it collides with; the links that leaves unburned."""
        r, best = self.r, None
        self.round += 1
        for fixed, leaf, j in self.candidates(link, limit):
            path = self.path(leaf, j)
            for s in range(self.k):
                i = fixed if fixed >= 0 else self.sender(s, leaf, j, busy_too=True)
                if i < 0:
                    continue
                links = (r.up[i], *path)
                hit = self.collisions(s, i, j, links)
                if any(self.protected.get(f, 0) >= self.round for f in hit):
                    continue
                cost = self.loss(hit, links) - self.gain(links) + self.rng.random()
                if best is None or cost < best[0]:
                    best = (cost, s, i, j, links, hit)
        if best is None:
            return [link]
        _cost, s, i, j, links, hit = best
        lost: list[int] = []
        for f in hit:
            lost += self.evict(f)
        self.place(s, i, j, links)
        self.protected[len(self.flows) - 1] = self.round + 3
        return [lk for lk in lost if not self.cover[lk]]


def search(r: Reach, k: int, seed: int = 41, repairs: int | None = None, budget_s: float | None = None,
           max_stages: int = 64) -> Found:
    """Stages burning every routed link: k of them if the search fits, else as many more as it takes.

    Deterministic for a seed: the repair budget is a count (`repairs`, by default one for every 10 routed
    links, at least 500; Selene's 24,230 links took 540), and a search that has not left fewer links
    unburned in a quarter of it stops early; more unburned links than that budget get a stage more at
    once. `budget_s` adds a wall-clock limit (none by default)."""
    st = _Search(r, max(k, 1), seed)
    repairs = repairs if repairs is not None else max(500, len(r.routed) // 10)
    order = sorted(r.routed, key=lambda lk: (r.users[lk].bit_count() if lk in r.users and lk not in
                                              st.receiver_of else 1 << 30, lk))
    for link in order:
        if not st.cover[link]:
            st.fit(link, 12)
    forced: list[int] = []
    last = len(order) + 1
    deadline = time.monotonic() + budget_s if budget_s is not None else None
    while True:
        queue = [lk for lk in order if not st.cover[lk]]
        tries, best, best_at = 0, len(queue), 0
        if len(queue) > repairs:  # more than repairs can mend: a stage more, at once
            queue = []
        while queue and tries < repairs and tries - best_at < max(100, repairs // 4):
            if deadline is not None and time.monotonic() > deadline:
                break
            link = queue.pop(0)
            if st.cover[link] or st.fit(link, 48):
                continue
            tries += 1
            queue += st.repair(link, 48)
            unburned = sum(1 for lk in set(queue) if not st.cover[lk])
            if unburned < best:
                best, best_at = unburned, tries
        st.used += tries
        left = [lk for lk in order if not st.cover[lk]]
        if not left or (forced and len(left) >= last) or st.k >= max_stages:
            break
        last = len(left)
        if not forced:
            forced = left
        st.add_stage()
        deadline = time.monotonic() + budget_s if budget_s is not None else None
        for link in left:
            if not st.cover[link]:
                st.fit(link, 48)
    stages = [[] for _ in range(st.k)]  # type: list[list[tuple[int, int, tuple[int, ...]]]]
    for flow in st.flows:
        if flow is not None:
            stages[flow[0]].append((flow[1], flow[2], flow[3]))
    kept = tuple(tuple(sorted(stage)) for stage in stages if stage)
    return Found(kept, tuple(sorted(forced)), tuple(lk for lk in order if not st.cover[lk]))
