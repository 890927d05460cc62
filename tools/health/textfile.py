"""Prometheus textfile-collector output (node_exporter --collector.textfile.directory), written atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .outcome import STATUSES, Outcome, exit_code, verdict


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(outcomes: Sequence[Outcome], level: str, host: str | None, finished_s: float, duration_s: float) -> str:
    base = f'level="{_label(level)}"' + (f',host="{_label(host)}"' if host else "")
    lines = [
        "# HELP bringup_health_check_status Health check outcome: 1 for the check's current status, 0 otherwise.",
        "# TYPE bringup_health_check_status gauge",
    ]
    for o in outcomes:
        for status in STATUSES:
            lines.append(f'bringup_health_check_status{{{base},check="{_label(o.check)}",status="{status}"}} '
                         f"{1 if o.status == status else 0}")
    overall = verdict(outcomes)
    lines += [
        "# HELP bringup_health_verdict Overall verdict of the run: 1 for the current status.",
        "# TYPE bringup_health_verdict gauge",
        *(f'bringup_health_verdict{{{base},status="{s}"}} {1 if overall == s else 0}' for s in STATUSES),
        "# HELP bringup_health_exit_code Exit code of the run (0 ok, 1 unhealthy, 2 critical, 3 unknown).",
        "# TYPE bringup_health_exit_code gauge",
        f"bringup_health_exit_code{{{base}}} {exit_code(outcomes)}",
        "# HELP bringup_health_last_run_timestamp_seconds When the run finished (Unix time).",
        "# TYPE bringup_health_last_run_timestamp_seconds gauge",
        f"bringup_health_last_run_timestamp_seconds{{{base}}} {finished_s:.3f}",
        "# HELP bringup_health_duration_seconds How long the run took.",
        "# TYPE bringup_health_duration_seconds gauge",
        f"bringup_health_duration_seconds{{{base}}} {duration_s:.3f}",
    ]
    measured = [(o.check, name, value) for o in outcomes for name, value in o.metrics]
    if measured:
        lines += [
            "# HELP bringup_health_measurement A figure a check measured (name says what, in its unit).",
            "# TYPE bringup_health_measurement gauge",
            *(f'bringup_health_measurement{{{base},check="{_label(c)}",name="{_label(n)}"}} {v:g}'
              for c, n, v in measured),
        ]
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write beside the target and rename, so the collector never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
