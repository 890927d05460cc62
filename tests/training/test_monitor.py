from __future__ import annotations

import gc
import time
from dataclasses import replace
from pathlib import Path

import pytest

from training.configs import model_config
from training.monitor import GcController, GoodputMeter, SlowStepDetector, mfu, peak_tflops


def test_flop_count_is_torchtitans_on_known_configs() -> None:
    # 6 x (parameters - input embedding) + 12 x layers x hidden x sequence, per token
    m8 = model_config("llama3_8b")
    assert m8.num_params() == 8_030_261_248  # Meta's Llama 3 8B
    assert m8.input_embedding_params() == 128256 * 4096
    assert m8.flops_per_token(4096) == 6 * (8_030_261_248 - 525_336_576) + 12 * 32 * 4096 * 4096 == 51_471_998_976
    assert model_config("llama3_1b").flops_per_token(4096) == 9_025_499_136
    assert model_config("llama3_70b").flops_per_token(4096) == 449_230_454_784
    assert model_config("llama3_70b-slice8").flops_per_token(4096) == 50_596_724_736
    # tied embeddings: the one matrix is also the output head, which does a matmul; nothing subtracted
    tied = replace(model_config("tiny"), tie_embeddings=True)
    assert tied.flops_per_token(128) == 6 * tied.num_params() + 12 * 2 * 64 * 128


def test_corrected_count_gives_the_issues_8b_figure() -> None:
    # 8B FSDP2 on 2x H200 at 10,747 tokens/s/GPU: 59.4% with the old count (embeddings included), 56.0% now
    m = model_config("llama3_8b")
    assert mfu(10747, m.flops_per_token(4096), peak_tflops("NVIDIA H200")) == pytest.approx(0.5593, abs=5e-4)
    old = 6 * m.num_params() + 12 * 32 * 4096 * 4096
    assert mfu(10747, old, 989.0) == pytest.approx(0.594, abs=5e-4)


def test_goodput_counts_the_whole_interval_including_a_checkpoint_stall() -> None:
    now = [0.0]
    meter = GoodputMeter(flops_per_token=1e9, peak_tflops=1.0, clock=lambda: now[0])
    for _ in range(4):  # four 1-second steps of 500 tokens: 0.5 PFLOP/s of 1 PFLOP/s
        now[0] += 1.0
        meter.add(500)
    good, seconds = meter.close_interval()
    assert seconds == 4.0 and good == pytest.approx(0.5)
    now[0] += 1.0
    meter.add(500)
    now[0] += 3.0  # a checkpoint write between steps: no tokens, wall time still counts
    good, seconds = meter.close_interval()
    assert seconds == 4.0 and good == pytest.approx(0.125)
    assert GoodputMeter(1e9, None, clock=lambda: now[0]).close_interval()[0] is None  # no GPU peak


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
