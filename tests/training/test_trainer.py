"""The trainer's seams (training/trainer.py, job_config.py, checkpoint_writer.py, drills.py): settings come
from flags with the launcher's environment as their fallback, read once; a checkpoint writer owns the marks
it has pending; the loop calls the step hooks registered on it (the fire drill is one) and knows no fault."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from tests.training.conftest import one_rank_here
from training.checkpoint import latest_complete, step_dir
from training.checkpoint_writer import CheckpointWriter
from training.configs import tiny
from training.data import Batch, LoaderState
from training.drills import KillDrill, drill_hooks, parse_drill
from training.job_config import add_train_args, job_config
from training.monitor import MetricsWriter
from training.trainer import Trainer


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_train_args(p)
    return p.parse_args(["--config", "tiny", "--run-dir", "/tmp/unused-run", *argv])


def test_a_flag_wins_over_the_launchers_environment_which_fills_the_flags_not_given() -> None:
    env = {"TRAINING_PEAK_TFLOPS": "1.5", "TRAINING_BREAKDOWN_EVERY": "25", "TRAINING_HOST": "gpu-0{local_rank}",
           "LOCAL_RANK": "1", "TRAINING_ATTEMPT": "2", "TRAINING_FAULT": "kill:1:13", "TRAINING_GRAD_POOL":
           "reduce-scatter", "TRAINING_EXPECTED_MFU": "", "TRAINING_INJECT": "stall:*:1.0:0.6"}
    cfg = job_config(_args("--breakdown-every", "0", "--steps", "7"), env)
    assert cfg.observe.breakdown_every == 0  # the flag, even where it is falsy
    assert (cfg.observe.peak_tflops, cfg.observe.host_name, cfg.attempt) == (1.5, "gpu-01", 2)
    assert (cfg.drill, cfg.inject, cfg.local_rank) == ("kill:1:13", "stall:*:1.0:0.6", 1)
    assert cfg.train.grad_pool == "reduce-scatter" and cfg.train.steps == 7 and cfg.train.seq_len == 128
    assert cfg.observe.expected_mfu is None  # an empty variable is unset
    bare = job_config(_args(), {})
    assert (bare.observe.breakdown_every, bare.observe.peak_tflops, bare.attempt, bare.drill) == (50, None, 0, "")
    assert job_config(_args("--grad-pool", "compute"), env).train.grad_pool == "compute"


def test_memory_settings_given_on_the_command_line_are_what_the_fit_plan_keeps() -> None:
    cfg = job_config(_args("--micro-batch", "1", "--auto-fit", "1", "--gpu-mem", "80"), {})
    assert cfg.fit.explicit == {"micro_batch"} and cfg.fit.auto_fit and cfg.fit.gpu_mem_gib == 80.0


def test_a_drill_runs_on_the_first_attempt_only_and_a_malformed_one_is_refused() -> None:
    assert drill_hooks("kill:1:13", 0) == [KillDrill(1, 13)]
    assert drill_hooks("kill:1:13", 1) == [] and drill_hooks("", 0) == []
    for bad in ("kill:1", "stall:1:3", "kill:x:3", "kill:1:3:4"):
        with pytest.raises(ValueError, match="kill:RANK:STEP"):
            parse_drill(bad)


class _LateEngine:
    """Saves that reach the disk only when told (an asynchronous DCP save still writing)."""

    name = "fake"
    model: torch.nn.Module = torch.nn.Linear(1, 1)

    def __init__(self) -> None:
        self.writing: list[Path] = []

    def save(self, path: Path) -> None:
        self.writing.append(path)

    def saved(self) -> bool:
        return not self.writing

    def wait_saved(self) -> None:
        for path in self.writing:
            (path / "shard").write_text("x")
        self.writing.clear()

    def load(self, path: Path) -> None:
        raise AssertionError("not loaded here")

    def train_step(self, batches: list[Batch], lr: float) -> tuple[float, float]:
        raise AssertionError("no steps here")


def test_each_writer_marks_its_own_checkpoints_once_they_are_on_disk_and_only_on_rank_0(tmp_path: Path) -> None:
    def writer(run: Path, rank: int) -> tuple[CheckpointWriter, _LateEngine]:
        engine = _LateEngine()
        return CheckpointWriter(run / "checkpoints", engine, rank, 2, 1, MetricsWriter(run, rank, "t"), tiny(),
                                None), engine

    w0, e0 = writer(tmp_path / "a", 0)
    w1, _ = writer(tmp_path / "b", 1)
    first = w0.save(2, LoaderState(0, 0, 0, 2))
    assert w0.in_flight and not w1.in_flight and not (first / "COMPLETE").exists()
    w0.poll()  # still writing: nothing marked
    assert not (first / "COMPLETE").exists()
    second = w0.save(4, None)  # waits for the first, marks it, starts the second
    assert (first / "COMPLETE").exists() and not (second / "COMPLETE").exists()
    e0.wait_saved()
    w0.poll()
    assert (second / "COMPLETE").exists() and not w0.in_flight
    assert latest_complete(tmp_path / "a" / "checkpoints") == second and not first.exists()  # keep 1
    assert json.loads((second / "config.json").read_text())["num_hidden_layers"] == 2  # HF files beside it
    w1.save(2, None)
    w1.flush()
    assert not (step_dir(tmp_path / "b" / "checkpoints", 2) / "COMPLETE").exists() and not w1.in_flight
    assert not (step_dir(tmp_path / "b" / "checkpoints", 2) / "config.json").exists()


def test_the_trainer_runs_its_step_hooks_after_each_recorded_step_and_its_checkpoint(tmp_path: Path) -> None:
    """Built once in this process (gloo, one rank, the tiny model on synthetic tokens); a hook sees each
    step after its metrics line and its checkpoint were written, and the loop ends with nothing pending."""
    run = tmp_path / "run"
    cfg = job_config(_args("--run-dir", str(run), "--synthetic", "--steps", "3", "--checkpoint-every", "2",
                           "--seq-len", "32", "--micro-batch", "1", "--breakdown-every", "0"), {})
    seen: list[tuple[int, list[int], bool]] = []

    def hook(t: Trainer, step: int) -> None:
        steps = [json.loads(line)["step"] for line in (run / "metrics_rank0.jsonl").read_text().splitlines()
                 if json.loads(line)["event"] == "step"]
        seen.append((step, steps, (step_dir(run / "checkpoints", step) / "extra_rank0.json").exists()))

    with one_rank_here():
        trainer = Trainer.build(cfg)
        trainer.step_hooks.append(hook)
        assert trainer.train() == 3
        trainer.close()
    assert seen == [(1, [1], False), (2, [1, 2], True), (3, [1, 2, 3], True)]  # the last step is saved too
    assert not trainer.checkpoints.in_flight
    assert latest_complete(run / "checkpoints") == step_dir(run / "checkpoints", 3)
