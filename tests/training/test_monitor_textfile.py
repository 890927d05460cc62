"""The training ranks' Prometheus textfile passes Prometheus's own linter."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from training.monitor import HELP, MetricsWriter, StepRecord


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus, deps/apt) not installed")
def test_a_ranks_textfile_has_help_and_type_for_every_family_and_passes_promtool(tmp_path: Path) -> None:
    writer = MetricsWriter(tmp_path, rank=0, job='run "7"')
    writer.step(StepRecord(step=3, loss=2.5, grad_norm=0.7, lr=1e-4, step_seconds=0.2, tokens=256,
                           tokens_per_s_per_gpu=1280.0, mfu=None, mem_allocated_gb=1.0, mem_peak_gb=2.0, slow=False),
                slow_total=1)
    writer.close()
    text = (tmp_path / "training_rank0.prom").read_text()
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")} == set(HELP)
