"""Where each step's time goes, per rank: data loading, waiting in collectives, and the rest (compute,
the optimizer, launching kernels: "busy"). Every `every` steps the ranks' per-step samples go to rank 0
in one small all-gather (3 floats per step per rank, at a step boundary), and rank 0 names the rank the
others wait for (the one with the most busy time, the least time in collectives) and its host.

Collective time: on NCCL, the process group's completion hook reports each collective's GPU duration
(`TORCH_NCCL_ENABLE_TIMING=1`, set before the group is made); on gloo, the time the calling thread spends
in `Work.wait()` (every blocking collective and every wait on an asynchronous one goes through it).

Slowdowns injected for drills and tests (`--inject`, or `TRAINING_INJECT` read at the edge,
training/job_config.py; first attempt only, ';'-separated; RANK `*` is every rank; never set by the launcher):
`compute:RANK:FACTOR` (that rank's busy time FACTOR x), `comm:RANK:FRACTION` (gloo: its waits
FRACTION longer), `stall:RANK:PROB:SECONDS` (a stall of SECONDS on a random PROB of its steps, from a
generator seeded by the rank: the same steps every run), `ckpt:RANK:SECONDS` (every checkpoint blocks
SECONDS longer: slow storage), `garbage:RANK:N` (N reference cycles per step that only the cyclic
collector frees, and a per-step cost that grows with the uncollected ones: each step walks a registry of
weak references to them, as a hook list or an allocator's block list would grow; with the GC controller
collecting every `--gc-every` steps the registry stays small, with `--gc-every 0` it grows without end).

The host name (`--host-name`, or `TRAINING_HOST` read at the edge) may hold `{local_rank}` (e.g.
`gpu-0{local_rank}`): one machine standing in for one host per rank (tests, drills); the launcher sets a
plain name per host.
"""

from __future__ import annotations

import json
import random
import socket
import statistics
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

STRAGGLER_RATIO = 1.3  # a rank busier than 1.3x the median of the others is the one they wait for
STALL_RATIO = 3.0  # a step on which one rank was busy 3x its usual time: a stall, that rank named


class CommClock:
    """Seconds this process spent in collectives since it was installed (monotonic, thread-safe)."""

    _original_wait: Callable[..., Any] | None = None
    _active: CommClock | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds = 0.0
        self.paused = False
        self.stretch = 0.0  # injected: each wait this much longer (fraction of its own duration)

    @property
    def seconds(self) -> float:
        with self._lock:
            return self._seconds

    def add(self, seconds: float) -> None:
        if not self.paused:
            with self._lock:
                self._seconds += seconds

    def install(self) -> None:
        backend = dist.get_backend() if dist.is_initialized() else "gloo"
        if backend == "nccl":
            group: Any = dist.distributed_c10d._get_default_group()
            try:
                group._register_on_completion_hook(lambda info: self.add(info.active_duration.total_seconds()))
            except (RuntimeError, AttributeError) as e:  # the job runs on; collective time reads 0
                print(f"breakdown: no NCCL completion hook ({e}); collective wait not measured", flush=True)
            return
        CommClock._active = self
        if CommClock._original_wait is None:
            original = CommClock._original_wait = dist.Work.wait

            def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
                t = time.perf_counter()
                try:
                    return original(work, *args, **kwargs)
                finally:
                    clock = CommClock._active
                    if clock is not None:
                        spent = time.perf_counter() - t
                        if clock.stretch and not clock.paused:
                            time.sleep(spent * clock.stretch)
                            spent *= 1 + clock.stretch
                        clock.add(spent)

            dist.Work.wait = wait  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        if CommClock._active is self:
            CommClock._active = None


class _Garbage:
    __slots__ = ("__weakref__", "me")

    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


@dataclass
class Injection:
    compute_factor: float = 1.0
    comm_stretch: float = 0.0
    stall_prob: float = 0.0
    stall_s: float = 0.0
    ckpt_s: float = 0.0
    garbage: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    uncollected: weakref.WeakSet[_Garbage] = field(default_factory=weakref.WeakSet)

    @classmethod
    def parse(cls, spec: str, rank: int) -> Injection:
        """What `spec` injects on `rank` (the caller passes "" after the first attempt)."""
        inj = cls(rng=random.Random(1000 + rank))
        for item in filter(None, spec.split(";")):
            kind, r, *values = item.split(":")
            if r != "*" and int(r) != rank:
                continue
            if kind == "compute":
                inj.compute_factor = float(values[0])
            elif kind == "comm":
                inj.comm_stretch = float(values[0])
            elif kind == "stall":
                inj.stall_prob, inj.stall_s = float(values[0]), float(values[1])
            elif kind == "ckpt":
                inj.ckpt_s = float(values[0])
            elif kind == "garbage":
                inj.garbage = int(values[0])
            else:
                raise ValueError(f"inject: unknown kind {kind!r} in {item!r}")
        return inj

    def delay(self, last_busy_s: float) -> float:
        """Seconds to stall this step: the slowed compute (from the last step's busy time) and any stall."""
        extra = (self.compute_factor - 1.0) * last_busy_s
        if self.stall_prob and self.rng.random() < self.stall_prob:
            extra += self.stall_s
        if self.garbage:
            for _ in self.uncollected:  # the cost that grows while the garbage is not collected
                pass
            for _ in range(self.garbage):
                self.uncollected.add(_Garbage())
        return max(extra, 0.0)


@dataclass(frozen=True)
class Window:
    """Every rank's samples for the steps of one gather: arrays indexed [rank][i]."""

    steps: list[int]
    hosts: list[str]
    step_s: list[list[float]]
    data_s: list[list[float]]
    comm_s: list[list[float]]

    def busy(self, rank: int) -> list[float]:
        return [max(s - d - c, 0.0) for s, d, c in zip(self.step_s[rank], self.data_s[rank], self.comm_s[rank],
                                                        strict=True)]

    def straggler(self) -> tuple[int, float] | None:
        """(rank, its median busy time over the others' median) when one rank holds the others up."""
        if len(self.hosts) < 2:
            return None
        med = [statistics.median(self.busy(r)) for r in range(len(self.hosts))]
        top = max(range(len(med)), key=lambda r: med[r])
        others = statistics.median([m for r, m in enumerate(med) if r != top])
        ratio = med[top] / others if others > 0 else float("inf") if med[top] > 0 else 1.0
        return (top, ratio) if ratio >= STRAGGLER_RATIO else None

    def stalls(self) -> list[tuple[int, int, float]]:
        """(step, rank, extra seconds) of steps where one rank's busy time was STALL_RATIO x its own median
        over the window (a rank that is always slow is a straggler, not a stall)."""
        busy = [self.busy(r) for r in range(len(self.hosts))]
        med = [statistics.median(b) for b in busy]
        out = []
        for i, step in enumerate(self.steps):
            excess = [(b[i] - m, r) for r, (b, m) in enumerate(zip(busy, med, strict=True))
                      if b[i] > STALL_RATIO * max(m, 1e-4)]
            if excess and max(excess)[0] > 0.05:
                extra, rank = max(excess)
                out.append((step, rank, extra))
        return out

    def summary(self) -> dict[str, Any]:
        ranks = range(len(self.hosts))
        strag = self.straggler()
        return {
            "event": "breakdown", "steps": [self.steps[0], self.steps[-1]], "world": len(self.hosts),
            "median_step_s": statistics.median(s for r in ranks for s in self.step_s[r]),
            "ranks": [{"rank": r, "host": self.hosts[r], "busy_s": statistics.median(self.busy(r)),
                       "data_s": statistics.median(self.data_s[r]), "comm_s": statistics.median(self.comm_s[r])}
                      for r in ranks],
            "waited_for": None if strag is None else {"rank": strag[0], "host": self.hosts[strag[0]],
                                                      "busy_ratio": round(strag[1], 3)},
            "stalls": [{"step": s, "rank": r, "host": self.hosts[r], "extra_s": round(x, 4)}
                       for s, r, x in self.stalls()],
        }


class StepBreakdown:
    """Per-rank step-time breakdown; `begin`/`end` around each step, a gather every `every` steps."""

    def __init__(self, every: int, run_dir: Path, device: torch.device, host: str | None = None,
                 inject: Injection | None = None) -> None:
        self.every = every
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.device = device
        self.host = host or socket.gethostname()
        self.inject = inject or Injection()
        self.clock = CommClock()
        self.clock.stretch = self.inject.comm_stretch
        if every > 0:
            self.clock.install()
        self._rows: list[tuple[int, float, float, float]] = []
        self._comm0 = 0.0
        self._last_busy = self._extra = 0.0
        self._hosts: list[str] | None = None
        self.windows: list[Window] = []
        self._out = run_dir / "breakdown.jsonl" if self.rank == 0 else None

    def begin(self, step: int) -> None:
        self._comm0 = self.clock.seconds
        self._extra = self.inject.delay(self._last_busy)
        if self._extra:
            time.sleep(self._extra)

    def end(self, step: int, step_s: float, data_s: float) -> Window | None:
        comm = self.clock.seconds - self._comm0
        self._last_busy = max(step_s - data_s - comm - self._extra, 0.0)  # the busy time without the injection
        if self.every <= 0:
            return None
        self._rows.append((step, step_s, data_s, comm))
        if len(self._rows) < self.every:
            return None
        return self._gather()

    def _gather(self) -> Window | None:
        rows, self._rows = self._rows, []
        self.clock.paused = True
        try:
            if self._hosts is None:
                hosts: list[object] = [None] * self.world
                if self.world > 1:
                    dist.all_gather_object(hosts, self.host)
                self._hosts = [str(h or self.host) for h in hosts]
            mine = torch.tensor([[s, d, c] for _, s, d, c in rows], dtype=torch.float64, device=self.device)
            if self.world > 1:
                flat = torch.empty((self.world * mine.shape[0], 3), dtype=mine.dtype, device=self.device)
                getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(flat, mine)
                out = flat.view(self.world, mine.shape[0], 3)
            else:
                out = mine.unsqueeze(0)
        finally:
            self.clock.paused = False
        if self.rank != 0:
            return None
        arr = out.cpu().tolist()
        win = Window([r[0] for r in rows], self._hosts, [[x[0] for x in a] for a in arr],
                     [[x[1] for x in a] for a in arr], [[x[2] for x in a] for a in arr])
        self.windows.append(win)
        if self._out is not None:
            with open(self._out, "a") as f:
                f.write(json.dumps({"time": time.time(), **win.summary()}) + "\n")
        return win

    def close(self) -> None:
        self.clock.uninstall()


def describe(win: Window) -> str:
    s = win.summary()
    w = s["waited_for"]
    who = f"rank {w['rank']} on {w['host']} ({w['busy_ratio']:.1f}x the others' busy time)" if w else "no rank"
    return (f"breakdown steps {s['steps'][0]}-{s['steps'][1]}: median step {s['median_step_s'] * 1e3:.0f} ms; "
            f"everyone waits for {who}; {len(s['stalls'])} stall(s)")
