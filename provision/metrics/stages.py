"""The metrics every stage leaves behind, written by the step runner once per run of any step.

Two files in the metrics directory (`provision.metrics.textfile`):
- `bringup_stage_<step>.prom`: this run of the step: hosts by outcome, each failed host with its reason,
  when it finished and how long it took;
- `bringup_lifecycle.prom`: the state store as it is after the run: each host's state (`golden` 0/1
  always present, so a host losing golden is a change of value), and the reason of every failed host.

The alert rules (roles/prometheus_server/files/rules/) read these; `bringup_lifecycle.prom` is rewritten
by every stage, so it is never older than the last stage that ran.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from provision.metrics.textfile import Family, file_slug, gauge, metrics_dir, write_families
from provision.state import HostRecord, State, StateStore

LIFECYCLE_FILE = "bringup_lifecycle.prom"
OUTCOMES = ("ok", "failed", "skipped")
log = logging.getLogger(__name__)


class StageResult(Protocol):
    """What the runner's `HostResult` gives (provision/steps/runner.py)."""

    @property
    def host(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...


def outcome(result: StageResult) -> str:
    return "skipped" if result.skipped else "ok" if result.ok else "failed"


def stage_families(stage: str, results: Sequence[StageResult], finished_s: float, duration_s: float) -> list[Family]:
    counts = {o: sum(1 for r in results if outcome(r) == o) for o in OUTCOMES}
    failed = [r for r in results if outcome(r) == "failed"]
    one = {"stage": stage}
    return [
        gauge("bringup_stage_hosts", "Hosts of the stage's last run by outcome (ok, failed, skipped).",
              (({**one, "outcome": o}, n) for o, n in counts.items())),
        gauge("bringup_stage_host_failed", "1 for each host the stage's last run failed, with the reason.",
              (({**one, "host": r.host, "reason": r.reason or "unknown"}, 1) for r in failed)),
        gauge("bringup_stage_last_run_timestamp_seconds", "When the stage's last run finished (Unix time).",
              [(one, finished_s)]),
        gauge("bringup_stage_duration_seconds", "How long the stage's last run took.", [(one, duration_s)]),
    ]


def lifecycle_families(records: Iterable[HostRecord], written_s: float) -> list[Family]:
    hosts = [r for r in records if r.in_site]
    return [
        gauge("bringup_host_state", "1 for the lifecycle state each host of the site is in.",
              (({"host": r.hostname, "rack": r.rack, "state": r.state.value}, 1) for r in hosts)),
        gauge("bringup_host_golden", "1 when the host is golden (may run training), else 0.",
              (({"host": r.hostname, "rack": r.rack}, int(r.state is State.golden)) for r in hosts)),
        gauge("bringup_host_failed", "1 for each failed host, with the reason it failed.",
              (({"host": r.hostname, "rack": r.rack, "reason": r.reason or "unknown"}, 1)
               for r in hosts if r.state is State.failed)),
        gauge("bringup_lifecycle_timestamp_seconds", "When the lifecycle snapshot was written (Unix time).",
              [({}, written_s)]),
    ]


def write_lifecycle(store: StateStore, now_s: float, directory: Path | None = None) -> Path:
    families = lifecycle_families(store.hosts(), now_s)
    return write_families(directory or metrics_dir(store.path), LIFECYCLE_FILE, families)


def write_stage(store: StateStore, stage: str, results: Sequence[StageResult], started_s: float,
                finished_s: float) -> list[Path]:
    """The runner's hook: this run's stage file and the lifecycle snapshot. A metrics directory that cannot
    be written is logged and never fails the step (the state store has the truth)."""
    directory = metrics_dir(store.path)
    try:
        return [write_families(directory, f"bringup_stage_{file_slug(stage)}.prom",
                               stage_families(stage, results, finished_s, finished_s - started_s)),
                write_lifecycle(store, finished_s, directory)]
    except OSError as exc:
        log.warning("stage metrics not written to %s: %s", directory, exc)
        return []
