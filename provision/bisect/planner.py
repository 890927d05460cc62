"""Which sub-groups to run a failing multi-host job on, round after round, to find the bad host(s).

Pure: no I/O. A planner hands out rounds of tests (disjoint host groups, run at the same time) and is
told which passed. The model is group testing: a job fails when at least one bad host takes part,
and passes otherwise. Hosts are only ever in one job at a time, so every round is a set of disjoint
groups, and a job needs `min_hosts` hosts: a small group is padded with hosts already cleared.

Two planners:

- `GridPlanner`, Imbue's scheme: the hosts in a grid, one job per row, then one per column; a host in a
  failing row and a failing column is the culprit. With two bad hosts in different rows and columns
  that leaves four candidates, which a third round tests one by one (Imbue resolved them by hand).
- `AdaptivePlanner`: splits every group known to hold a bad host into `k` parts, with `k` chosen so
  the search ends in about `target_rounds` rounds, tests `k - 1` of them and infers the last (if the
  others pass, the bad host is there). Siblings of a failing part that were not run are tested again
  as a whole. Single hosts are always run (never inferred), so every culprit has a failing job of its own.

A group that failed while all of its parts pass has no single bad host: the failure needs several of
its hosts together (a bad link between two of them, a switch) or is intermittent. It is reported as
`unexplained`, never blamed on a host.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from provision.errors import BringupError


class BisectPlanError(BringupError):
    """The bisect planner was asked something that cannot be planned (too few hosts, unknown test)."""


@dataclass(frozen=True)
class Test:
    """One job run: the hosts under suspicion plus cleared hosts to reach the job's minimum size."""

    id: int
    suspects: tuple[str, ...]
    padding: tuple[str, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.suspects + self.padding


@dataclass(frozen=True)
class Finding:
    """What a finished (or stopped) search concluded."""

    culprits: tuple[str, ...]
    cleared: tuple[str, ...]
    unexplained: tuple[tuple[str, ...], ...]  # groups that failed although every part of them passed
    undecided: tuple[str, ...]  # hosts the search could not test (too few cleared hosts to pad with)
    runs: int
    rounds: int


class Planner(Protocol):
    def next_round(self) -> list[Test]: ...

    def record(self, results: Mapping[int, bool]) -> None: ...

    def finding(self) -> Finding: ...


def split(items: Sequence[str], parts: int) -> list[tuple[str, ...]]:
    """`items` in `parts` contiguous pieces whose sizes differ by at most one (larger ones first)."""
    parts = max(1, min(parts, len(items)))
    base, extra = divmod(len(items), parts)
    out: list[tuple[str, ...]] = []
    at = 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(tuple(items[at : at + size]))
        at += size
    return out


@dataclass
class _Book:
    """Bookkeeping shared by both planners: ids, counts, the cleared hosts, the verdicts so far."""

    hosts: tuple[str, ...]
    min_hosts: int
    cleared: set[str] = field(default_factory=set)
    culprits: list[str] = field(default_factory=list)
    unexplained: list[tuple[str, ...]] = field(default_factory=list)
    undecided: set[str] = field(default_factory=set)
    runs: int = 0
    rounds: int = 0
    next_id: int = 0
    pending: dict[int, Test] = field(default_factory=dict)

    def make(self, suspects: Sequence[str], busy: set[str]) -> Test | None:
        """A test of `suspects`, padded from cleared hosts not `busy` this round; None when it cannot be."""
        need = max(0, self.min_hosts - len(suspects))
        padding: list[str] = []
        if need:
            for host in self.hosts:
                if host in self.cleared and host not in busy and host not in suspects:
                    padding.append(host)
                    if len(padding) == need:
                        break
            if len(padding) < need:
                return None
        test = Test(self.next_id, tuple(suspects), tuple(padding))
        self.next_id += 1
        busy.update(test.hosts)
        self.pending[test.id] = test
        return test

    def take(self, results: Mapping[int, bool]) -> dict[int, tuple[Test, bool]]:
        unknown = set(results) - set(self.pending)
        if unknown:
            raise BisectPlanError(f"results for tests that were not handed out: {sorted(unknown)}")
        missing = set(self.pending) - set(results)
        if missing:
            raise BisectPlanError(f"no result for tests {sorted(missing)}")
        out = {tid: (self.pending[tid], passed) for tid, passed in results.items()}
        self.runs += len(out)
        self.rounds += 1 if out else 0
        self.pending.clear()
        for test, passed in out.values():
            if passed:
                self.cleared.update(test.suspects)
        return out

    def finding(self) -> Finding:
        return Finding(
            culprits=tuple(h for h in self.hosts if h in set(self.culprits)),
            cleared=tuple(h for h in self.hosts if h in self.cleared),
            unexplained=tuple(self.unexplained),
            undecided=tuple(h for h in self.hosts if h in self.undecided),
            runs=self.runs,
            rounds=self.rounds,
        )


def _check_hosts(hosts: Sequence[str], min_hosts: int) -> tuple[str, ...]:
    if min_hosts < 1:
        raise BisectPlanError("a job needs at least one host")
    if len(set(hosts)) != len(hosts):
        raise BisectPlanError("the group names a host more than once")
    if len(hosts) < max(2, min_hosts):
        raise BisectPlanError(f"a group of {len(hosts)} host(s) cannot be bisected (the job needs {min_hosts})")
    return tuple(hosts)


@dataclass
class _Pool:
    hosts: tuple[str, ...]
    # True when a job on exactly these hosts (plus cleared ones) failed; False when only inferred.
    evidenced: bool
    # The failing group this one was inferred from (itself when evidenced): what stays unexplained.
    origin: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin:
            self.origin = self.hosts


class AdaptivePlanner:
    """Adaptive k-way splitting with inference of the last part; see the module docstring."""

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        min_hosts: int = 2,
        target_rounds: int = 3,
        infer_last: bool = True,
        known_failing: bool = True,
    ) -> None:
        if target_rounds < 1:
            raise BisectPlanError("target_rounds must be at least 1")
        self._book = _Book(_check_hosts(hosts, min_hosts), min_hosts)
        self.target_rounds = target_rounds
        self._max_split = max(2, math.ceil(math.pow(len(self._book.hosts), 1 / target_rounds) - 1e-9))
        self.infer_last = infer_last
        whole = self._book.hosts
        self._bad: list[_Pool] = [_Pool(whole, evidenced=True)] if known_failing else []
        self._untested: list[tuple[str, ...]] = [] if known_failing else [whole]
        # For each handed-out test: how to read its result (the pool it splits, or an untested group).
        self._families: list[tuple[_Pool, list[tuple[str, ...]], list[int]]] = []
        self._whole_tests: dict[int, tuple[str, ...]] = {}

    def _parts(self, pool: _Pool) -> int:
        if len(pool.hosts) <= 1:
            return 1
        remaining = max(1, self.target_rounds - self._book.rounds)
        k = math.ceil(math.pow(len(pool.hosts), 1 / remaining) - 1e-9)
        # A search that overran its rounds (several bad hosts) keeps the first split's fan-out instead of
        # testing a large leftover group host by host.
        k = max(2, min(k, self._max_split, len(pool.hosts)))
        if not self._book.cleared:
            # Nothing to pad with yet: keep every part at the job's minimum size.
            k = max(2, min(k, len(pool.hosts) // self._book.min_hosts))
        return k

    def next_round(self) -> list[Test]:
        book = self._book
        busy: set[str] = set()
        tests: list[Test] = []
        self._families = []
        self._whole_tests = {}
        deferred_bad: list[_Pool] = []
        for pool in sorted(self._bad, key=lambda p: -len(p.hosts)):
            if len(pool.hosts) == 1 and pool.evidenced:
                book.culprits.append(pool.hosts[0])
                continue
            parts: list[tuple[str, ...]] = split(pool.hosts, self._parts(pool))
            singletons = all(len(p) == 1 for p in parts)
            run = parts if (singletons or not self.infer_last) else parts[:-1]
            made = [book.make(p, busy) for p in run]
            if any(t is None for t in made):
                for t in made:
                    if t is not None:
                        book.pending.pop(t.id)
                        busy.difference_update(t.hosts)
                deferred_bad.append(pool)
                continue
            ids = [t.id for t in made if t is not None]
            tests.extend(t for t in made if t is not None)
            self._families.append((pool, parts, ids))
        deferred_untested: list[tuple[str, ...]] = []
        for group in self._untested:
            test = book.make(group, busy)
            if test is None:
                deferred_untested.append(group)
                continue
            tests.append(test)
            self._whole_tests[test.id] = group
        self._bad = deferred_bad
        self._untested = deferred_untested
        if not tests:
            # Whatever is left cannot be tested (nothing cleared to pad a small group with).
            for pool in self._bad:
                book.undecided.update(pool.hosts)
            for group in self._untested:
                book.undecided.update(group)
            self._bad, self._untested = [], []
        return tests

    def record(self, results: Mapping[int, bool]) -> None:
        book = self._book
        taken = book.take(results)
        for tid, group in self._whole_tests.items():
            _, passed = taken[tid]
            if not passed:
                self._bad.append(_Pool(group, evidenced=True))
        for pool, parts, ids in self._families:
            outcomes = [taken[i][1] for i in ids]
            for part, passed in zip(parts, outcomes, strict=False):
                if not passed:
                    self._bad.append(_Pool(part, evidenced=True))
            untried = parts[len(ids) :]
            if all(outcomes):
                if untried:
                    self._bad.append(_Pool(untried[0], evidenced=False, origin=pool.origin))
                elif pool.origin not in book.unexplained:
                    book.unexplained.append(pool.origin)
            else:
                self._untested.extend(untried)
        self._families, self._whole_tests = [], {}

    def finding(self) -> Finding:
        book = self._book
        ready = [p.hosts[0] for p in self._bad if len(p.hosts) == 1 and p.evidenced]
        book.culprits.extend(h for h in ready if h not in book.culprits)
        self._bad = [p for p in self._bad if not (len(p.hosts) == 1 and p.evidenced)]
        return book.finding()


class GridPlanner:
    """Imbue's scheme: rows, then columns, then (only when ambiguous) the candidates one by one."""

    def __init__(self, hosts: Sequence[str], *, min_hosts: int = 2, rows: int | None = None) -> None:
        book = _Book(_check_hosts(hosts, min_hosts), min_hosts)
        self._book = book
        n = len(book.hosts)
        self.rows = rows or max(2, math.isqrt(n))
        self.cols = math.ceil(n / self.rows)
        self._cell = {host: divmod(i, self.cols) for i, host in enumerate(book.hosts)}
        self._stage = 0
        self._failing_rows: set[int] = set()
        self._failing_cols: set[int] = set()
        self._ids: dict[int, int] = {}
        self._candidates: list[str] = []

    def _line(self, axis: int, index: int) -> tuple[str, ...]:
        return tuple(h for h in self._book.hosts if self._cell[h][axis] == index)

    def next_round(self) -> list[Test]:
        book = self._book
        busy: set[str] = set()
        self._ids = {}
        if self._stage in (0, 1):
            count = self.rows if self._stage == 0 else self.cols
            tests = []
            for index in range(count):
                line = self._line(self._stage, index)
                if not line:
                    continue
                test = book.make(line, busy)
                if test is None:
                    raise BisectPlanError(f"a grid line of {len(line)} host(s) is below the job's minimum")
                self._ids[test.id] = index
                tests.append(test)
            return tests
        if self._stage == 2:
            rows, cols = self._failing_rows, self._failing_cols
            candidates = [h for h in book.hosts if self._cell[h][0] in rows and self._cell[h][1] in cols]
            if len(self._failing_rows) <= 1 or len(self._failing_cols) <= 1:
                # Each failing line holds a bad host and only one line crosses them all: no ambiguity.
                book.culprits.extend(candidates)
                self._stage = 3
                return []
            tests = []
            for host in candidates:
                test = book.make((host,), busy)
                if test is None:
                    book.undecided.add(host)
                    continue
                tests.append(test)
            self._stage = 3
            return tests
        return []

    def record(self, results: Mapping[int, bool]) -> None:
        book = self._book
        taken = book.take(results)
        if self._stage in (0, 1):
            failing = {self._ids[tid] for tid, (_, passed) in taken.items() if not passed}
            (self._failing_rows if self._stage == 0 else self._failing_cols).update(failing)
            self._stage += 1
            return
        for test, passed in taken.values():
            if not passed:
                book.culprits.append(test.suspects[0])

    def finding(self) -> Finding:
        return self._book.finding()


@dataclass(frozen=True)
class SimulatedSearch:
    finding: Finding
    bad: frozenset[str]

    @property
    def correct(self) -> bool:
        return set(self.finding.culprits) == set(self.bad)


def simulate(planner: Planner, bad: Iterable[str], *, max_rounds: int = 64) -> SimulatedSearch:
    """Drive `planner` against a job that fails exactly when a host of `bad` takes part."""
    bad_set = frozenset(bad)
    for _ in range(max_rounds):
        tests = planner.next_round()
        if not tests:
            break
        planner.record({t.id: not (set(t.hosts) & bad_set) for t in tests})
    else:
        raise BisectPlanError(f"the search did not finish within {max_rounds} rounds")
    return SimulatedSearch(planner.finding(), bad_set)
