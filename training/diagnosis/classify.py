"""Read the instant-MFU series the way Imbue did, with the per-rank breakdown and the hosts' health and
port counters as evidence. Pure: samples and evidence in, anomalies out.

Instant MFU here is per step over wall time (from one step's start to the next: a checkpoint save, a
collection or an evaluation between two steps counts), as a ratio to the expected: 1.0 is on target.
Patterns (the level of the flat ones is the median ratio once warmed up):

| kind | pattern | alert |
|---|---|---|
| `straggler` | one rank's busy time >= 1.5x the others' in most windows (its host named) | yes |
| `dead_link_or_pcie_x4` | flat below 0.2 of expected from the start | yes |
| `gdr_broken` | flat 0.2-0.45 (hosts without nvidia_peermem named) | yes |
| `degraded_link_or_cpu` | flat 0.45-0.85 (hosts whose HCA error counters rose named) | yes |
| `slow_collectives` | every rank's time in collectives >= 1.25x the healthy run's, busy time not | yes |
| `checkpoint` | drops on checkpoint steps | no: labelled |
| `periodic_drops` | drops every k-th step, not checkpoints (evaluation) | no: labelled |
| `random_stalls` | rare drops at random steps, one rank waited for (3 events 10+ steps apart) | yes, a suspect |
| `gc_decline` | a slow decline over the run (4 of its 8 eighths below the one before) | yes |
| `clock_throttling` | good first, then often near 0.7 (2x quarter 1's share, 100+ steps; clock-event hosts) | yes |
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WARMUP = 5
DROP = 0.5  # a step below half the series' level is a drop
FLAT_SPREAD = 0.1  # first and last quarters within 10% of each other: flat
DECLINE = 0.85  # the last quarter at most 85% of the first, falling quarter after quarter: a decline
DECLINE_SAMPLES = 100  # fewer steady steps are too short a run to call a slow decline
# nor to tell "good first, throttled later" from jitter: on the H200 a clean run's first 44-69 steps
# (28 ms each, host-bound) had a third of them 15-30% slow after a quiet first quarter (2026-12-02)
THROTTLE_SAMPLES = 100


@dataclass(frozen=True)
class Sample:
    step: int
    wall_s: float  # this step's start to the next one's
    checkpoint: bool = False  # a checkpoint was saved after this step


@dataclass(frozen=True)
class Expected:
    """The healthy step: its time (from the expected MFU, or learned), and (learned) its median busy time
    and time in collectives per rank; `absolute` False when the step time is the run's own start."""

    step_s: float
    busy_s: float | None = None
    comm_s: float | None = None
    absolute: bool = True


@dataclass(frozen=True)
class RankView:
    """What the breakdown windows say about ranks: the rank named as waited for in each window (None: none)
    with its busy ratio, each window's median busy and collective seconds, and the stalls (step, host)."""

    hosts: Sequence[str] = ()
    waited_for: Sequence[tuple[int, float] | None] = ()
    busy_s: Sequence[float] = ()
    comm_s: Sequence[float] = ()
    stalls: Sequence[tuple[int, str]] = ()


@dataclass(frozen=True)
class Evidence:
    """Per host: the failing health checks (`provision health --json` problems: check -> reason) and the
    HCA port counters that rose during the job (counter -> increase)."""

    health: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    port_counters: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def hosts_failing(self, check: str) -> list[str]:
        return sorted(h for h, checks in self.health.items() if check in checks)

    def hosts_with_port_errors(self) -> list[str]:
        return sorted(h for h, c in self.port_counters.items() if any(v > 0 for v in c.values()))


@dataclass(frozen=True)
class Anomaly:
    kind: str
    alert: bool
    hosts: tuple[str, ...]
    steps: tuple[int, ...]
    level: float  # the series' level (ratio to expected) where this was seen
    evidence: dict[str, Any]

    def line(self) -> str:
        who = ", ".join(self.hosts) or "no host named"
        span = f"steps {self.steps[0]}-{self.steps[-1]}" if self.steps else "whole run"
        return (f"training anomaly {self.kind} ({'ALERT' if self.alert else 'label'}): {who}; {span}; "
                f"level {self.level:.2f} of expected; evidence {self.evidence}")


def relative(samples: Sequence[Sample]) -> Expected:
    """No expectation yet: the median of the run's first 20 steps after warm-up (flat levels cannot be judged)."""
    base = [s.wall_s for s in samples if s.step > WARMUP and not s.checkpoint][:20]
    return Expected(statistics.median(base or [s.wall_s for s in samples]), absolute=False)


def classify(samples: Sequence[Sample], expected: Expected | None, ranks: RankView | None = None,
             evidence: Evidence | None = None) -> list[Anomaly]:
    ranks = ranks or RankView()
    evidence = evidence or Evidence()
    samples = [s for s in samples if s.step > WARMUP]
    if len(samples) < 20:
        return []
    exp = expected or relative(samples)
    r = [exp.step_s / s.wall_s for s in samples]
    level = statistics.median(r)
    out: list[Anomaly] = []
    drops = [i for i, x in enumerate(r) if x < DROP * level]
    for deeper in (0.25, 0.1):  # noisy steps (a loaded host) drop to half; stalls go far deeper
        if len(drops) <= 0.05 * len(samples):
            break
        drops = [i for i in drops if r[i] < deeper * level]
    ckpt = [i for i in drops if samples[i].checkpoint or (i > 0 and samples[i - 1].checkpoint)]
    if ckpt:
        out.append(Anomaly("checkpoint", False, (), tuple(samples[i].step for i in ckpt), level,
                           {"drops": len(ckpt), "min_ratio": round(min(r[i] for i in ckpt), 3)}))
    others = [i for i in drops if i not in set(ckpt)]
    out += _drops(samples, others, level, ranks)
    steady = [x for i, x in enumerate(r) if i not in set(drops)]
    out += _trend(samples, steady, level, exp, ranks, evidence)
    return out


def _drops(samples: Sequence[Sample], idx: list[int], level: float, ranks: RankView) -> list[Anomaly]:
    if len(idx) < 2:
        return []  # one slow step is not a pattern
    steps = [samples[i].step for i in idx]
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    if len(steps) >= 3 and len(gaps) == 1:
        return [Anomaly("periodic_drops", False, (), tuple(steps), level, {"every": gaps.pop(), "drops": len(steps)})]
    if len(steps) > 0.05 * len(samples):
        return []  # frequent drops are a level change, judged by the trend
    named = Counter(h for s, h in ranks.stalls if s in set(steps))
    host, n = named.most_common(1)[0] if named else ("", 0)
    # 3 separate events at least: two chance spikes, or one burst of slow steps (a neighbour's load), are not it
    events = _events(sorted(s for s, h in ranks.stalls if h == host and s in set(steps)))
    suspect = (host,) if events >= 3 and n >= (2 * len(steps) + 2) // 3 else ()
    return [Anomaly("random_stalls", bool(suspect), suspect, tuple(steps), level,
                    {"stalls": len(steps), "named_by_breakdown": dict(named), "events": events})]


def _events(steps: Sequence[int], apart: int = 10) -> int:
    """Stalls closer than `apart` steps to the previous one are one event."""
    return sum(1 for i, s in enumerate(steps) if i == 0 or s - steps[i - 1] >= apart)


def _quarters(x: Sequence[float]) -> list[float]:
    n = max(len(x) // 4, 1)
    return [statistics.median(x[k * n:(k + 1) * n] or x[-1:]) for k in range(4)]


def _trend(samples: Sequence[Sample], steady: list[float], level: float, exp: Expected, ranks: RankView,
           evidence: Evidence) -> list[Anomaly]:
    """The first of: a straggler, a decline, clock throttling, slow collectives, a flat low level."""
    steps = (samples[0].step, samples[-1].step)
    q = _quarters(steady)
    for judge in (_straggler, _decline, _throttling, _collectives, _flat):
        found = judge(steps, steady, q, level, exp, ranks, evidence)
        if found is not None:
            return [found]
    return []


Steps = tuple[int, int]


def _straggler(steps: Steps, steady: list[float], q: list[float], level: float, exp: Expected, ranks: RankView,
               evidence: Evidence) -> Anomaly | None:
    named = [w for w in ranks.waited_for if w is not None and w[1] >= 1.5]
    by_rank = Counter(w[0] for w in named)
    if not by_rank or by_rank.most_common(1)[0][1] * 2 <= len(ranks.waited_for):
        return None
    rank = by_rank.most_common(1)[0][0]
    ratio = statistics.median(w[1] for w in named if w[0] == rank)
    host = ranks.hosts[rank] if rank < len(ranks.hosts) else f"rank{rank}"
    return Anomaly("straggler", True, (host,), steps, level,
                   {"rank": rank, "busy_ratio": round(ratio, 2), "windows": f"{by_rank[rank]}/{len(ranks.waited_for)}",
                    **_flat_context(level, exp.absolute)})


def _decline(steps: Steps, steady: list[float], q: list[float], level: float, exp: Expected, ranks: RankView,
             evidence: Evidence) -> Anomaly | None:
    if len(steady) < DECLINE_SAMPLES or not (q[3] <= DECLINE * q[0] and q[0] >= q[1] >= q[2] >= q[3]):
        return None
    # Slow and steady: eighths of the run below the one before (4 of 7: noise flips a few). A slowdown
    # that set in late and stays flat (a loaded host, a neighbour's job) falls in one or two: not a decline.
    n = len(steady) // 8
    eighths = [statistics.median(steady[k * n:(k + 1) * n]) for k in range(8)]
    falls = sum(b < 0.99 * a for a, b in itertools.pairwise(eighths))
    if falls < 4:
        return None
    return Anomaly("gc_decline", True, (), steps, level,
                   {"quarters": [round(v, 3) for v in q], "eighths_falling": falls,
                    "remedy": "GC controller (gc_every: automatic GC off, one collection on every rank at the same "
                              "step); a restart cures it for a while"})


def _throttling(steps: Steps, steady: list[float], q: list[float], level: float, exp: Expected, ranks: RankView,
                evidence: Evidence) -> Anomaly | None:
    top = statistics.median(sorted(steady)[len(steady) // 2:])  # the good steps' level
    low = [x for x in steady if 0.55 * top <= x <= 0.85 * top]
    early_good = q[0] >= 0.9 * top and (not exp.absolute or q[0] >= 0.85)
    if len(steady) < THROTTLE_SAMPLES or not (early_good and 0.1 * len(steady) <= len(low) <= 0.7 * len(steady)):
        return None
    # Good first, throttled later (heat builds): the first quarter has at most half the later share of
    # slow steps. Noise (a loaded host) puts them everywhere alike: measured on a shared CPU, not throttling.
    cut = len(steady) // 4
    share = [sum(0.55 * top <= x <= 0.85 * top for x in part) / max(len(part), 1)
             for part in (steady[:cut], steady[cut:])]
    late_good = sum(x >= 0.9 * top for x in steady[3 * cut:]) / max(len(steady) - 3 * cut, 1)
    if share[0] > 0.5 * share[1] or late_good < 0.3:  # throttled steps come and go; a decline stays down
        return None
    clocked = tuple(evidence.hosts_failing("gpu_clock_events"))
    return Anomaly("clock_throttling", True, clocked, steps, level,
                   {"throttled_fraction": round(len(low) / len(steady), 3),
                    "gpu_clock_events": {h: evidence.health[h]["gpu_clock_events"] for h in clocked}})


def _collectives(steps: Steps, steady: list[float], q: list[float], level: float, exp: Expected, ranks: RankView,
                 evidence: Evidence) -> Anomaly | None:
    if not exp.comm_s or not exp.busy_s or not ranks.comm_s or not ranks.busy_s:
        return None
    comm, busy = statistics.median(ranks.comm_s) / exp.comm_s, statistics.median(ranks.busy_s) / exp.busy_s
    if comm < 1.25 or busy > 1.15:
        return None
    hosts = evidence.hosts_with_port_errors()
    return Anomaly("slow_collectives", True, tuple(hosts), steps, level,
                   {"comm_ratio": round(comm, 2), "busy_ratio": round(busy, 2),
                    "port_counters": {h: dict(evidence.port_counters[h]) for h in hosts}})


def _flat(steps: Steps, steady: list[float], q: list[float], level: float, exp: Expected, ranks: RankView,
          evidence: Evidence) -> Anomaly | None:
    flat = max(q) - min(q) <= FLAT_SPREAD * max(q)
    if not (exp.absolute and flat and level < 0.85):
        return None
    if level < 0.2:
        kind, hosts = "dead_link_or_pcie_x4", evidence.hosts_with_port_errors()
    elif level < 0.45:
        kind, hosts = "gdr_broken", evidence.hosts_failing("nvidia_peermem")
    else:
        kind, hosts = "degraded_link_or_cpu", evidence.hosts_with_port_errors()
    ev: dict[str, Any] = {"level": round(level, 3)}
    if hosts and kind == "gdr_broken":
        ev["nvidia_peermem"] = {h: evidence.health[h]["nvidia_peermem"] for h in hosts}
    elif hosts:
        ev["port_counters"] = {h: dict(evidence.port_counters[h]) for h in hosts}
    return Anomaly(kind, True, tuple(hosts), steps, level, ev)


def _flat_context(level: float, absolute: bool) -> dict[str, Any]:
    return {"level_of_expected": round(level, 3)} if absolute else {}
