from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from training.configs import model_config
from training.monitor import GcController, SlowStepDetector, mfu, peak_tflops


def test_mfu_formula_reproduces_the_reference_baseline() -> None:
    # 8B, seq 4096, 8,933 tokens/s/GPU on H200 was reported as 49% MFU
    m = model_config("llama3_8b")
    assert m.flops_per_token(4096) == pytest.approx(6 * m.num_params() + 12 * 32 * 4096 * 4096)
    assert mfu(8933, m.flops_per_token(4096), peak_tflops("NVIDIA H200")) == pytest.approx(0.49, abs=0.01)


def test_peak_table_prefers_the_most_specific_name() -> None:
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("some cpu") is None


def test_slow_step_dumps_this_ranks_stacks(tmp_path: Path) -> None:
    d = SlowStepDetector(factor=3.0, window=10, out_dir=tmp_path, rank=3, warmup=3)
    try:
        for step in range(1, 6):
            d.begin(step)
            assert not d.end(0.01)
        d.begin(6)
        assert d.end(0.5)  # 50x the median
        assert d.slow_steps == 1
        dump = tmp_path / "stacks_step6_rank3.txt"
        assert (dump.exists() and "Thread" in dump.read_text()) or "File" in dump.read_text()
    finally:
        d.close()


def test_watchdog_dumps_while_a_step_is_still_stuck(tmp_path: Path) -> None:
    d = SlowStepDetector(factor=2.0, window=10, out_dir=tmp_path, rank=0, warmup=3)
    try:
        for step in range(1, 5):
            d.begin(step)
            d.end(0.05)
        d.begin(5)
        deadline = time.monotonic() + 5
        while not (tmp_path / "stacks_step5_inflight_rank0.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "stacks_step5_inflight_rank0.txt").exists()
    finally:
        d.close()


def test_gc_is_disabled_and_collected_on_schedule() -> None:
    ctl = GcController(every=5)
    try:
        assert not gc.isenabled()
        before = gc.get_stats()[1]["collections"]
        ctl.step(3)
        assert gc.get_stats()[1]["collections"] == before
        ctl.step(5)
        assert gc.get_stats()[1]["collections"] == before + 1
    finally:
        ctl.close()
    assert gc.isenabled()


class _Clock:
    """A clock that moves only when the test moves it (the watchdog then never sees a step run long)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _detector(tmp_path: Path, dumps: list[str], clock: _Clock, window: int, dumps_first: int = 3,
              dump_interval_s: float = 600.0) -> SlowStepDetector:
    def dump(out_dir: Path, rank: int, tag: str) -> Path:
        dumps.append(tag)
        return out_dir / tag

    return SlowStepDetector(factor=3.0, window=window, out_dir=tmp_path, rank=0, warmup=3, clock=clock, dump=dump,
                            dumps_first=dumps_first, dump_interval_s=dump_interval_s)


def test_a_lasting_slowdown_becomes_the_new_baseline(tmp_path: Path) -> None:
    dumps: list[str] = []
    d = _detector(tmp_path, dumps, _Clock(), window=10)
    try:
        times = [0.01] * 5 + [0.1] * 20  # a host throttled for good from step 6
        flagged = []
        for step, seconds in enumerate(times, 1):
            d.begin(step)
            if d.end(seconds):
                flagged.append(step)
    finally:
        d.close()
    # slow until the slower steps are half the window, then the median has moved and none is slow
    assert flagged == [6, 7, 8, 9, 10]
    assert d.slow_steps == 5


def test_stack_dumps_are_rate_limited_but_every_slow_step_is_counted(tmp_path: Path) -> None:
    dumps: list[str] = []
    clock = _Clock()
    d = _detector(tmp_path, dumps, clock, window=100, dumps_first=2, dump_interval_s=600.0)
    try:
        step, flagged = 0, 0
        for _ in range(15):  # 9 normal steps, then a slow one 100 s later
            for _ in range(9):
                step += 1
                d.begin(step)
                assert not d.end(0.01)
            clock.now += 100
            step += 1
            d.begin(step)
            flagged += d.end(1.0)
    finally:
        d.close()
    assert flagged == 15 and d.slow_steps == 15
    # the first two, then one per 600 s: t=100, 200, then 800 and 1400
    assert dumps == ["step10", "step20", "step80", "step140"]


def test_a_hung_step_dumps_even_when_the_rate_limit_is_spent(tmp_path: Path) -> None:
    dumps: list[str] = []
    clock = _Clock()
    d = _detector(tmp_path, dumps, clock, window=100, dumps_first=1, dump_interval_s=600.0)
    d.hang_after_s = 120.0
    try:
        for step in range(1, 5):
            d.begin(step)
            d.end(0.01)
        d.begin(5)
        d.end(1.0)  # slow: the one dump the limit allows
        d.begin(6)
        clock.now += 10  # slow but not hung: the limit holds
        time.sleep(1.2)  # the watchdog polls every 0.5 s
        assert dumps == ["step5"]
        clock.now += 200  # in flight for 210 s: a hang, dumped despite the limit
        deadline = time.monotonic() + 5
        while "step6_inflight" not in dumps and time.monotonic() < deadline:
            time.sleep(0.1)
        assert dumps == ["step5", "step6_inflight"]
    finally:
        d.close()
