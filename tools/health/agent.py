"""One run of the agent: pick the checks, run their probes once each, judge, fold into a report."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import catalog
from .check import Check, run_check
from .config import Expectations
from .outcome import Outcome, exit_code, verdict
from .probe_run import record
from .probes import Probe, ProbeResult


class Runner(Protocol):
    def run_all(self, probes: Sequence[Probe], parallel: bool = True) -> dict[str, ProbeResult]: ...


@dataclass(frozen=True)
class Report:
    host: str | None
    level: str
    outcomes: tuple[Outcome, ...]
    started_s: float
    duration_s: float

    @property
    def verdict(self) -> str:
        return verdict(self.outcomes)

    @property
    def exit_code(self) -> int:
        return exit_code(self.outcomes)

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": "bringup-health",
            "schema": 1,
            "host": self.host,
            "level": self.level,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_s)),
            "duration_s": round(self.duration_s, 3),
            "checks": [o.as_dict() for o in self.outcomes],
        }


def run(exp: Expectations, runner: Runner, level: str, only: tuple[str, ...] = (),
        record_dir: Path | None = None) -> Report:
    started = time.time()
    t0 = time.monotonic()
    checks: tuple[Check, ...] = catalog.select(level, only)
    applicable = [c for c in checks if c.not_applicable(exp) is None]
    available = catalog.probes(exp)
    wanted = {name for c in applicable for name in c.probes}
    if record_dir is not None:
        # A capture should be complete, so that any site's expectations can be replayed against it.
        wanted |= {name for c in checks for name in c.probes}
    fast = [available[n] for n in sorted(wanted) if n in available and not n.startswith("long-")]
    # GPU work runs one probe at a time: stress and all-reduce on the same GPUs would measure each other.
    slow = [available[n] for n in sorted(wanted) if n.startswith("long-") and n in available]
    results = dict(runner.run_all(fast, parallel=True))
    results.update(runner.run_all(slow, parallel=False))
    if record_dir is not None:
        record(results, record_dir)
    outcomes = tuple(run_check(c, results, exp) for c in checks)
    return Report(exp.host, level, outcomes, started, time.monotonic() - t0)
