"""Slowdowns injected for drills and tests (`--inject`, or `TRAINING_INJECT` read at the edge,
training/job_config.py; first attempt only; never set by the launcher): ';'-separated items, RANK `*` is every
rank.

- `compute:RANK:FACTOR`: that rank's busy time (its step less the time in collectives) FACTOR x;
- `stall:RANK:PROB:SECONDS`: a stall of SECONDS on a random PROB of its steps, from a generator seeded by the
  rank (the same steps every run);
- `garbage:RANK:N`: N reference cycles per step that only the cyclic collector frees, and a per-step cost that
  grows with the uncollected ones (each step walks a registry of weak references to them, as a hook list or an
  allocator's block list would grow; with the GC controller collecting every `--gc-every` steps the registry
  stays small, with `--gc-every 0` it grows without end);
- `comm:RANK:FRACTION` (gloo): each of its collective waits that the breakdown counts FRACTION longer (not
  the breakdown's own gather, nor the waits after the breakdown is closed: the last checkpoint's, close()'s);
- `ckpt:RANK:SECONDS`: every checkpoint it writes blocks SECONDS longer (slow storage), inside the save: the
  checkpoint's `blocking_seconds` and its step's sample grow, no step's busy time does.

A seam outside the training loop and outside the measurement: the worker (training/train.py) installs them
around the `Trainer` only when asked, and what they cost is real time spent where a slow GPU, link or disk
would spend it, so the step-time breakdown (training/breakdown.py), which knows nothing of them, reports it
there: compute, stalls and garbage inside the engine's step (busy time), the stretch inside each collective
wait (collective time: installed before the trainer is built, so that the breakdown's clock, which wraps the
wait it finds, times it), the checkpoint's inside the engine's save (the checkpoint's blocking time).
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from training.breakdown import CommClock, wrap_waits
from training.data import Batch
from training.engines import Engine

if TYPE_CHECKING:
    from training.trainer import Trainer

_FIELDS = {"compute": ("FACTOR",), "comm": ("FRACTION",), "stall": ("PROB", "SECONDS"), "ckpt": ("SECONDS",),
           "garbage": ("N",)}


class _Garbage:
    __slots__ = ("__weakref__", "me")

    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


@dataclass
class Injection:
    """What is injected on one rank."""

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
        """What `spec` injects on `rank`; ValueError for a malformed item, whichever rank it names."""
        inj = cls(rng=random.Random(1000 + rank))
        for item in filter(None, spec.split(";")):
            kind, _, rest = item.partition(":")
            r, *values = rest.split(":")
            if kind not in _FIELDS:
                raise ValueError(f"inject: unknown kind {kind!r} in {item!r}")
            try:
                if len(values) != len(_FIELDS[kind]) or not (r == "*" or r.isdigit()):
                    raise ValueError
                numbers = [float(int(v)) if kind == "garbage" else float(v) for v in values]
            except ValueError:
                raise ValueError(f"inject: {item!r} is not {':'.join((kind, 'RANK', *_FIELDS[kind]))}") from None
            if r != "*" and int(r) != rank:
                continue
            if kind == "compute":
                inj.compute_factor = numbers[0]
            elif kind == "comm":
                inj.comm_stretch = numbers[0]
            elif kind == "stall":
                inj.stall_prob, inj.stall_s = numbers
            elif kind == "ckpt":
                inj.ckpt_s = numbers[0]
            else:
                inj.garbage = int(numbers[0])
        return inj

    @property
    def slows_steps(self) -> bool:
        return self.compute_factor != 1.0 or bool(self.stall_prob) or bool(self.garbage)

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


class SlowedEngine:
    """An engine with one rank's injected slowdowns inside its step and its save. `comm_seconds`: the
    breakdown's count of collective time, left out of the busy time the compute factor multiplies."""

    def __init__(self, inner: Engine, inject: Injection, comm_seconds: Callable[[], float]) -> None:
        self.inner, self.inject, self.comm_seconds = inner, inject, comm_seconds
        self.name: str = inner.name
        self.model: torch.nn.Module = inner.model
        self._last_busy = 0.0

    def train_step(self, batches: list[Batch], lr: float) -> tuple[float, float]:
        extra = self.inject.delay(self._last_busy)
        if extra:
            time.sleep(extra)
        t, comm = time.perf_counter(), self.comm_seconds()
        try:
            return self.inner.train_step(batches, lr)
        finally:
            self._last_busy = max(time.perf_counter() - t - (self.comm_seconds() - comm), 0.0)

    def save(self, path: Path) -> None:
        if self.inject.ckpt_s:
            time.sleep(self.inject.ckpt_s)
        self.inner.save(path)

    def saved(self) -> bool:
        return self.inner.saved()

    def wait_saved(self) -> None:
        self.inner.wait_saved()

    def load(self, path: Path) -> None:
        self.inner.load(path)


class Slowdowns:
    """`--inject` for every rank, checked when made (ValueError). Used as a context around the trainer's
    build and run: entered before the build (the collective waits made stretchable), `attach` once it is
    built (this rank's share), exited after (every wait put back)."""

    def __init__(self, spec: str) -> None:
        Injection.parse(spec, 0)
        self.spec = spec
        self.stretch = 0.0  # this rank's, once attached
        self._clock: CommClock | None = None  # the breakdown's: waits it does not count are not stretched
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> Slowdowns:
        if any(item.startswith("comm:") for item in self.spec.split(";")):
            self._undo = wrap_waits(self._stretch)
        return self

    def _stretch(self, waited_s: float) -> None:
        if self.stretch and self._clock is not None and self._clock.counting:
            time.sleep(waited_s * self.stretch)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stretch, self._clock = 0.0, None
        if self._undo is not None:
            self._undo()
            self._undo = None

    def attach(self, trainer: Trainer) -> None:
        """This rank's slowdowns on the built trainer: its engine slowed, its collective waits stretched."""
        inject = self.for_rank(trainer.rank)
        clock = trainer.watch.breakdown.clock
        self.stretch_waits(inject.comm_stretch, dist.get_backend(), clock)
        if inject.slows_steps or inject.ckpt_s:
            trainer.engine = trainer.checkpoints.engine = SlowedEngine(trainer.engine, inject, lambda: clock.seconds)

    def for_rank(self, rank: int) -> Injection:
        """What is injected on `rank`."""
        return Injection.parse(self.spec, rank)

    def stretch_waits(self, fraction: float, backend: str, clock: CommClock) -> None:
        """From now on, on gloo, each collective wait that `clock` counts is `fraction` longer."""
        if self._undo is not None and backend == "gloo":
            self.stretch, self._clock = fraction, clock
