"""`python -m training report` on the job JSONL of a real GPU run (1 H200, 2026-12-01: the 8B at the
auto-fit choice of that day, which ran at 138.5 GiB reserved with 14 allocator retries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.training.conftest import FIXTURES
from training.joblog import read_job
from training.report import main, summarise

RUN = FIXTURES / "real_data_2026-12-01" / "llama3_8b_job_real_metrics.jsonl"


def test_summary_surfaces_memory_pressure_and_both_mfu_figures() -> None:
    s = summarise(read_job(RUN))
    assert s["steps"] == 8 and s["ranks"] == 1
    assert s["alloc_retries_max"] == 14 and s["mem_reserved_gib_max"] == pytest.approx(138.5, abs=0.05)
    assert 0.40 < s["mfu_median"] < 0.43 and s["goodput_mfu_mean"] < s["mfu_median"]
    assert s["plan"].startswith("auto-fit: --micro-batch 2")


def test_report_writes_a_png_and_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "r.png"
    assert main([str(RUN), "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "allocator retries 14" in out and "tokens/s/GPU median 7,989" in out


def test_report_of_a_run_without_steps_fails(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"event": "built"}\n{"event": "step", "trunc')
    assert main([str(tmp_path)]) == 1
