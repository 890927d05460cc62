"""One JSONL per job: `RUN/metrics.jsonl`, written by rank 0 (schema in training/README.md).

Every rank still writes its own `metrics_rank{R}.jsonl` and Prometheus textfile (`MetricsWriter`);
on top, each step's record of every rank is gathered to rank 0 over a gloo group (a few hundred
bytes per rank, at the step boundary where the ranks are in step anyway) and appended there, with
rank 0's events, so one file answers "which rank, on which host, was slow or short of memory"."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from training.jsonl import read_jsonl
from training.monitor import MetricsWriter, StepRecord

SCHEMA = 1
JOB_FILE = "metrics.jsonl"


class JobMetricsWriter(MetricsWriter):
    def __init__(self, run_dir: Path, rank: int, world: int, job: str, prom_dir: Path | None = None) -> None:
        super().__init__(run_dir, rank, job, prom_dir)
        self.world = world
        self._group = dist.new_group(backend="gloo") if dist.is_initialized() and world > 1 else None
        self._job = open(run_dir / JOB_FILE, "a", buffering=1) if rank == 0 else None  # noqa: SIM115

    def _write(self, row: dict[str, Any]) -> None:
        if self._job is not None:
            self._job.write(json.dumps({"schema": SCHEMA, **row}) + "\n")

    def event(self, kind: str, **fields: object) -> None:
        super().event(kind, **fields)
        self._write({"event": kind, "time": time.time(), "rank": self.rank, "world": self.world, **fields})

    def step(self, rec: StepRecord, slow_total: int) -> None:
        super().step(rec, slow_total)
        row = {"event": "step", "time": time.time(), "rank": self.rank, "world": self.world,
               "slow_total": slow_total, **rec.__dict__}
        rows: list[Any] = [row]
        if self._group is not None:
            rows = [None] * self.world if self.rank == 0 else []
            dist.gather_object(row, rows if self.rank == 0 else None, dst=0, group=self._group)
        for r in rows:
            if isinstance(r, dict):
                self._write(r)

    def close(self) -> None:
        super().close()
        if self._job is not None:
            self._job.close()


def read_job(run_dir: Path, max_bytes: int = 1 << 30) -> list[dict[str, Any]]:
    """The job's rows (RUN_DIR, or the JSONL file itself); a run from before this file existed: rank
    0's own file."""
    path = run_dir if run_dir.is_file() else run_dir / JOB_FILE
    if not path.exists():
        path = run_dir / "metrics_rank0.jsonl"
    return read_jsonl(path, max_bytes)
