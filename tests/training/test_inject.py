"""Slowdowns injected for drills and tests (training/inject.py) sit outside the loop and the measurement: real
time spent inside the engine's step, a collective wait or a save, which the step-time breakdown
(training/breakdown.py, knowing nothing of them) reports where it was spent. The 4-rank straggler they make is
pinned in tests/training/test_breakdown.py, rare stalls in test_diagnosis_runs.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist

from tests.training.conftest import train_here
from training.breakdown import CommClock
from training.inject import Injection, Slowdowns


@pytest.mark.parametrize("spec", ["slow:0:2", "compute:1", "comm:a:0.5", "stall:3:0.5", "garbage:*:many",
                                  "garbage:0:1.5", "compute:0:2;ckpt:2"])
def test_a_malformed_injection_is_refused_whichever_rank_it_names(spec: str) -> None:
    with pytest.raises(ValueError, match=r"^inject: "):
        Slowdowns(spec)


def test_a_malformed_injection_ends_the_worker_with_the_configuration_code_before_anything_is_built(
        tmp_path: Path) -> None:
    code, err = train_here(["--config", "tiny", "--run-dir", str(tmp_path / "run"), "--synthetic"],
                           {"TRAINING_INJECT": "stall:0:often:1"})
    assert code == 2 and "inject: 'stall:0:often:1'" in err
    assert not (tmp_path / "run").exists()


def test_each_rank_gets_its_own_items_and_a_stall_generator_seeded_by_its_rank() -> None:
    spec = "compute:2:10;stall:*:0.5:1.0;ckpt:0:3"
    two, zero = Injection.parse(spec, 2), Injection.parse(spec, 0)
    assert (two.compute_factor, two.stall_s, two.ckpt_s, zero.compute_factor, zero.ckpt_s) == (10, 1.0, 0, 1, 3)
    again = Injection.parse(spec, 2)
    stalled = [i for i in range(20) if two.delay(0.0)]
    assert stalled == [i for i in range(20) if again.delay(0.0)] and 0 < len(stalled) < 20  # the same steps each run
    assert stalled != [i for i in range(20) if Injection.parse(spec, 1).delay(0.0)]


def test_a_stretched_collective_wait_is_collective_time_and_every_wait_is_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stretch wraps the wait before the breakdown's clock does (the worker enters the slowdowns before
    the trainer is built), so the clock times it."""
    monkeypatch.setattr(dist.Work, "wait", _wait)
    with Slowdowns("comm:1:9;comm:0:0.5") as slowdowns:
        clock = CommClock()
        clock.install()
        inject = slowdowns.for_rank(1)
        slowdowns.stretch_waits(inject.comm_stretch, "nccl", clock)
        assert inject.comm_stretch == 9 and slowdowns.stretch == 0  # gloo only
        slowdowns.stretch_waits(inject.comm_stretch, "gloo", clock)
        took = _timed_wait()
        clock.uninstall()
    assert took >= 0.1 and clock.seconds == pytest.approx(took, rel=0.1)
    assert dist.Work.wait is _wait


def test_a_wait_the_breakdown_does_not_count_is_not_stretched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the breakdown's own gather (its clock paused), nor a wait once the breakdown is closed (the last
    checkpoint's, close()'s barrier): stretched 9x, the 10 ms stand-in wait would take 100 ms."""
    monkeypatch.setattr(dist.Work, "wait", _wait)
    with Slowdowns("comm:*:9") as slowdowns:
        clock = CommClock()
        clock.install()
        slowdowns.stretch_waits(9, "gloo", clock)
        clock.paused = True
        paused = _timed_wait()
        clock.paused = False
        clock.uninstall()
        closed = _timed_wait()
    assert paused < 0.1 and closed < 0.1 and clock.seconds == 0


def _wait(work: Any, *args: Any, **kwargs: Any) -> bool:
    """A stand-in for a collective's wait taking 10 ms."""
    time.sleep(0.01)
    return True


def _timed_wait() -> float:
    t = time.perf_counter()
    dist.Work.wait(None)  # type: ignore[arg-type]
    return time.perf_counter() - t


def test_an_injected_stall_is_busy_time_and_a_slow_save_is_the_checkpoints_blocking_time(tmp_path: Path) -> None:
    """One rank in this process through the worker's own edge (`train`): each step stalls 0.2 s inside the
    engine's step, the checkpoint's save blocks 0.2 s longer."""
    run = tmp_path / "run"
    code, err = train_here(["--config", "tiny", "--run-dir", str(run), "--synthetic", "--seq-len", "32",
                            "--micro-batch", "1", "--steps", "2", "--checkpoint-every", "2", "--breakdown-every", "2",
                            "--expected-store", str(tmp_path / "expected.json")],
                           {"TRAINING_INJECT": "stall:0:1.0:0.2;ckpt:0:0.2"})
    assert code == 0, err
    (window,) = [json.loads(line) for line in (run / "breakdown.jsonl").read_text().splitlines()]
    mine = window["ranks"][0]
    assert mine["busy_s"] >= 0.2 and mine["data_s"] < 0.2 and mine["comm_s"] < 0.2
    events = [json.loads(line) for line in (run / "metrics_rank0.jsonl").read_text().splitlines()]
    (saved,) = [e for e in events if e["event"] == "checkpoint"]
    assert saved["blocking_seconds"] >= 0.2
    assert all(e["step_seconds"] >= 0.2 for e in events if e["event"] == "step")
