"""Where a diagnosis goes: one line in the job log, `RUN/anomalies.jsonl` (the supervisor and
`provision job anomalies` read it: the suspect hosts' state-store history), and the Prometheus
textfile `training_anomaly.prom` with `training_anomaly{job,kind,host}` (1 while it holds; labels
such as checkpoint are not alerts and are not exported)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from training.diagnosis.classify import Anomaly
from training.jsonl import read_jsonl

ANOMALIES = "anomalies.jsonl"
PROM = "training_anomaly.prom"


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


class AnomalySink:
    def __init__(self, run_dir: Path, job: str, prom_dir: Path | None = None) -> None:
        self.path = run_dir / ANOMALIES
        self.prom = (prom_dir or run_dir) / PROM
        self.job = job
        self._seen: set[tuple[str, tuple[str, ...]]] = set()
        self.active: dict[tuple[str, str], float] = {}

    def emit(self, anomalies: list[Anomaly]) -> list[Anomaly]:
        """Record the anomalies not reported before (kind and hosts); returns them."""
        new = [a for a in anomalies if (a.kind, a.hosts) not in self._seen]
        for a in new:
            self._seen.add((a.kind, a.hosts))
            print(a.line(), file=sys.stderr, flush=True)
            with open(self.path, "a") as f:
                f.write(json.dumps({"time": time.time(), "kind": a.kind, "alert": a.alert, "hosts": list(a.hosts),
                                    "steps": [a.steps[0], a.steps[-1]] if a.steps else [],
                                    "level": round(a.level, 4), "evidence": a.evidence}) + "\n")
            if a.alert:
                for host in a.hosts or ("",):
                    self.active[(a.kind, host)] = 1.0
        if new:
            self._write_prom()
        return new

    def _write_prom(self) -> None:
        lines = ["# HELP training_anomaly A pattern the job's MFU diagnosis reports (1: seen in this job).",
                 "# TYPE training_anomaly gauge"]
        for (kind, host), v in sorted(self.active.items()):
            labels = f'job="{_label(self.job)}",kind="{_label(kind)}",host="{_label(host)}"'
            lines.append(f"training_anomaly{{{labels}}} {v}")
        self.prom.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.prom.with_suffix(".prom.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.prom)


def read_anomalies(run_dir: Path, limit_bytes: int = 4 * 2**20) -> list[dict[str, object]]:
    """The job's anomalies (bounded read: a runaway file is cut at `limit_bytes`)."""
    path = run_dir / ANOMALIES
    if not path.is_file():
        return []
    return read_jsonl(path, limit_bytes)
