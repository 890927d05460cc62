"""Where each step's time goes, per rank: data loading, waiting in collectives, and the rest (compute,
the optimizer, launching kernels: "busy"). Every `every` steps the ranks' per-step samples go to rank 0
in one small all-gather (3 floats per step per rank, at a step boundary), and rank 0 names the rank the
others wait for (the one with the most busy time, the least time in collectives) and its host.

Collective time: on NCCL, the process group's completion hook reports each collective's GPU duration
(`TORCH_NCCL_ENABLE_TIMING=1`, set before the group is made); on gloo, the time the calling thread spends
in `Work.wait()` (every blocking collective and every wait on an asynchronous one goes through it).

The host name (`--host-name`, or `TRAINING_HOST` read at the edge) may hold `{local_rank}` (e.g.
`gpu-0{local_rank}`): one machine standing in for one host per rank (tests, drills); the launcher sets a
plain name per host.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

STRAGGLER_RATIO = 1.3  # a rank busier than 1.3x the median of the others is the one they wait for
STALL_RATIO = 3.0  # a step on which one rank was busy 3x its usual time: a stall, that rank named


def wrap_waits(after: Callable[[float], None]) -> Callable[[], None]:
    """Wrap `Work.wait` as it is now: `after(seconds waited)` runs after each wait, in the waiting thread.
    Returns the undo: `after` runs no more, and the wait found is put back unless something wrapped it since."""
    found = dist.Work.wait
    live = True

    def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return found(work, *args, **kwargs)
        finally:
            if live:
                after(time.perf_counter() - t)

    def undo() -> None:
        nonlocal live
        live = False
        if dist.Work.wait is wait:
            dist.Work.wait = found  # type: ignore[method-assign]

    dist.Work.wait = wait  # type: ignore[method-assign,assignment]
    return undo


class CommClock:
    """Seconds this process spent in collectives while installed (monotonic, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds = 0.0
        self.paused = False
        self._installed = False
        self._undo: Callable[[], None] | None = None

    @property
    def seconds(self) -> float:
        with self._lock:
            return self._seconds

    @property
    def counting(self) -> bool:
        """Installed and not paused: collective time now is counted (not the breakdown's own gather, which
        pauses it, nor anything after the breakdown is closed)."""
        return self._installed and not self.paused

    def add(self, seconds: float) -> None:
        if not self.paused:
            with self._lock:
                self._seconds += seconds

    def install(self) -> None:
        self._installed = True
        backend = dist.get_backend() if dist.is_initialized() else "gloo"
        if backend == "nccl":
            group: Any = dist.distributed_c10d._get_default_group()
            try:
                group._register_on_completion_hook(lambda info: self.add(info.active_duration.total_seconds()))
            except (RuntimeError, AttributeError) as e:  # the job runs on; collective time reads 0
                print(f"breakdown: no NCCL completion hook ({e}); collective wait not measured", flush=True)
        elif self._undo is None:
            self._undo = wrap_waits(self.add)

    def uninstall(self) -> None:
        self._installed = False
        if self._undo is not None:
            self._undo()
            self._undo = None


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

    def __init__(self, every: int, run_dir: Path, device: torch.device, host: str | None = None) -> None:
        self.every = every
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.device = device
        self.host = host or socket.gethostname()
        self.clock = CommClock()
        if every > 0:
            self.clock.install()
        self._rows: list[tuple[int, float, float, float]] = []
        self._comm0 = 0.0
        self._hosts: list[str] | None = None
        self.windows: list[Window] = []
        self._out = run_dir / "breakdown.jsonl" if self.rank == 0 else None

    def begin(self, step: int) -> None:
        self._comm0 = self.clock.seconds

    def end(self, step: int, step_s: float, data_s: float) -> Window | None:
        if self.every <= 0:
            return None
        comm = self.clock.seconds - self._comm0
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
