"""The whole job on CPU: 2 processes over gloo, the tiny model, a fixed corpus; the runs of one rank in the
test's own process (conftest.train_here). DeepSpeed ZeRO-3's run on CPU, its partitioned parameters and
optimizer state and its exact resume, is test_supervisor_sim's (one job for both)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.conftest import FIXTURES, REPO, step_records, tiny_args, torchrun, train_here

pytestmark = pytest.mark.slow
STEPS = 20


@pytest.fixture(scope="module")
def straight_run(corpus: Path, tokenizer_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("straight")
    torchrun(tiny_args(corpus, tokenizer_path, run, STEPS, ckpt_every=10))
    return run


def _extra(run: Path, step: int, rank: int) -> dict[str, object]:
    raw: dict[str, object] = json.loads((run / "checkpoints" / f"step_{step:08d}" / f"extra_rank{rank}.json").read_text())
    return raw


def test_loss_falls_on_fixed_corpus(straight_run: Path) -> None:
    recs = step_records(straight_run)
    assert sorted(recs) == list(range(1, STEPS + 1))
    first, last = recs[1]["loss"], recs[STEPS]["loss"]
    assert first > 5.5  # about ln(300) at initialisation
    assert last < first - 1.5


def test_a_run_capped_by_max_steps_saves_its_last_step_and_resumes_from_it(
        corpus: Path, tokenizer_path: Path, tmp_path: Path) -> None:
    """One rank in this process (the cap is no matter of processes): 3 steps, then 2 more, against a run
    that went through step 5 at once."""
    run, straight = tmp_path / "capped", tmp_path / "straight"
    args = tiny_args(corpus, tokenizer_path, run, STEPS, ckpt_every=10)
    assert train_here([*args, "--max-steps-this-run", "3"])[0] == 0
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_00000003"
    assert (run / "checkpoints" / "step_00000003" / "COMPLETE").exists()
    code, err = train_here([*args, "--max-steps-this-run", "2"])
    assert code == 0 and "at step 3" in err
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_00000005"
    assert train_here([*tiny_args(corpus, tokenizer_path, straight, STEPS, ckpt_every=10),
                       "--max-steps-this-run", "5"])[0] == 0
    a, b = step_records(straight), step_records(run)
    assert sorted(b) == [1, 2, 3, 4, 5]
    for s in (4, 5):  # continued from step 3, not from scratch: the uninterrupted run's losses
        assert b[s]["loss"] == pytest.approx(a[s]["loss"], abs=1e-6), s


def _built(run: Path, rank: int) -> dict[str, object]:
    for line in (run / f"metrics_rank{rank}.jsonl").read_text().splitlines():
        rec: dict[str, object] = json.loads(line)
        if rec["event"] == "built":
            return rec
    raise AssertionError("no built event")


def test_no_rank_holds_the_whole_model(straight_run: Path) -> None:
    for rank in (0, 1):
        built = _built(straight_run, rank)
        assert int(built["local_params"]) <= 0.55 * int(built["params"])  # type: ignore[call-overload]


def test_checkpoint_is_sharded_per_rank_and_marked_complete(straight_run: Path) -> None:
    ckpt = straight_run / "checkpoints" / "step_00000020"
    assert (ckpt / "COMPLETE").exists()
    assert (straight_run / "checkpoints" / "latest").read_text().strip() == "step_00000020"
    shards = sorted(p.name for p in ckpt.glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]
    extra = _extra(straight_run, STEPS, 1)
    assert extra["engine"] == "fsdp" and extra["world"] == 2


def test_merge_writes_hf_named_safetensors_that_load_strictly(straight_run: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from training.configs import tiny
    from training.merge import merge
    from training.model import Llama

    out = tmp_path / "model.safetensors"
    merge(straight_run / "checkpoints" / "step_00000020", out)
    tensors = load_file(str(out))
    assert "model.layers.1.self_attn.k_proj.weight" in tensors and "lm_head.weight" in tensors
    assert not any("optim" in k or "exp_avg" in k for k in tensors)
    model = Llama(tiny())
    model.load_state_dict(tensors, strict=True)
    assert all(torch.isfinite(t).all() for t in tensors.values())


def test_prometheus_textfile_and_jsonl_per_rank(straight_run: Path) -> None:
    text = (straight_run / "training_rank1.prom").read_text()
    assert 'training_step{job="bringup-train",rank="1"} 20.0' in text
    assert "# TYPE training_tokens_per_second_per_gpu gauge" in text
    assert 'training_mfu_ratio{job="bringup-train",rank="1"} NaN' in text  # no GPU, no peak: not a number
    rec = step_records(straight_run, rank=1)[STEPS]
    assert rec["tokens"] == 2 * 128


@pytest.fixture(scope="module")
def supervised(corpus: Path, tokenizer_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m training launch` on localhost (2 ranks), rank 1 killed at step 13: restarted from step 10."""
    run = tmp_path_factory.mktemp("supervised")
    hostfile = run.parent / f"{run.name}.hosts"
    hostfile.write_text("localhost slots=2\n")
    health = f"{sys.executable} {FIXTURES / 'fake_health.py'} {{hosts}}"
    train = tiny_args(corpus, tokenizer_path, run, STEPS, ckpt_every=10)[4:]  # drop --config/--engine
    train = [a for i, a in enumerate(train) if a != "--run-dir" and (i == 0 or train[i - 1] != "--run-dir")]
    cmd = [sys.executable, "-m", "training", "launch", "--hostfile", str(hostfile), "--config", "tiny",
           "--run-dir", str(run), "--max-restarts", "2", "--rdzv-port", "29533", "--health-cmd", health, "--", *train]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "TRAINING_FAULT": "kill:1:13"}
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return run


def test_supervisor_restarts_a_killed_rank_from_the_last_checkpoint(supervised: Path) -> None:
    events = [json.loads(line) for line in (supervised / "supervisor.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "restart", "start", "finished"]
    restart = events[1]
    assert restart["failed"] and restart["dropped"] == {} and restart["checkpoint"] == "step_00000010"


def test_a_restart_resumed_from_step_10_matches_twenty_straight_steps(straight_run: Path, supervised: Path) -> None:
    """The supervised run's second attempt: new processes resuming from its step 10 checkpoint."""
    log = (supervised / "logs" / "attempt1_localhost.log").read_text()
    assert "resumed from" in log and "at step 10" in log
    a, b = step_records(straight_run), step_records(supervised)
    assert sorted(b) == list(range(1, STEPS + 1))
    for s in range(11, STEPS + 1):
        assert b[s]["loss"] == pytest.approx(a[s]["loss"], abs=1e-6), s
        assert b[s]["grad_norm"] == pytest.approx(a[s]["grad_norm"], abs=1e-6), s
    # the loader is where the straight run's was: same files, same byte offsets, on every rank
    for rank in (0, 1):
        assert _extra(supervised, STEPS, rank)["loader"] == _extra(straight_run, STEPS, rank)["loader"]


def test_restart_on_fewer_ranks_reshards_the_model_and_the_data(straight_run: Path, corpus: Path,
                                                                 tokenizer_path: Path, tmp_path: Path) -> None:
    """What a restart after dropping a host does: the FSDP2 checkpoint of 2 ranks loads on 1, and the
    one rank takes over the bytes both had left to read."""
    run = tmp_path / "shrunk"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copytree(straight_run / "checkpoints" / "step_00000010", run / "checkpoints" / "step_00000010")
    code, err = train_here(tiny_args(corpus, tokenizer_path, run, 12, ckpt_every=10))  # one rank, in this process
    assert code == 0 and "saved by 2 ranks, now 1" in err
    recs = step_records(run)
    assert sorted(recs) == [11, 12]
    assert recs[11]["loss"] < step_records(straight_run)[1]["loss"] - 1.0  # trained weights, not a fresh model
    old = [_extra(straight_run, 10, rank)["loader"] for rank in (0, 1)]
    left_before = sum(s["end"] - s["offset"] for st in old for s in st["segments"])  # type: ignore[index]
    now = _extra(run, 12, 0)["loader"]
    left_after = sum(s["end"] - s["offset"] for s in now["segments"])  # type: ignore[index]
    assert now["world"] == 1 and now["epoch"] == 0  # type: ignore[index]
    assert 0 < left_after < left_before


def test_one_jsonl_per_job_has_every_ranks_steps_and_the_report_plots_it(
        straight_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.joblog import read_job
    from training.report import main as report_main

    rows = read_job(straight_run)
    steps = [r for r in rows if r["event"] == "step"]
    assert {(r["rank"], r["step"]) for r in steps} == {(rank, s) for rank in (0, 1) for s in range(1, STEPS + 1)}
    for r in steps:
        assert r["schema"] == 1 and r["world"] == 2 and r["host"]
        assert {"data_seconds", "mem_reserved_gb", "alloc_retries", "mfu", "goodput_mfu"} <= r.keys()
    assert next(r["event"] for r in rows if r["event"] != "step") == "built"
    png = tmp_path / "report.png"
    assert report_main([str(straight_run), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert f"steps 1-{STEPS} ({STEPS}), 2 rank(s)" in out


def test_resume_refuses_a_checkpoint_whose_metadata_would_run_code(straight_run: Path, corpus: Path,
                                                                   tokenizer_path: Path, tmp_path: Path) -> None:
    """Issue 38: a checkpoint copied from elsewhere whose DCP metadata pickle calls os.system (read by one
    rank in this process: `python -m training train`'s code, no torchrun)."""
    import pickle

    from tests.training.test_safe_load import Payload

    run, marker = tmp_path / "hostile", tmp_path / "ran"
    ckpt = run / "checkpoints" / "step_00000010"
    shutil.copytree(straight_run / "checkpoints" / "step_00000010", ckpt)
    (ckpt / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    code, err = train_here(tiny_args(corpus, tokenizer_path, run, STEPS, ckpt_every=10))
    assert code == 2  # CONFIG_WRONG: no restart cures it (training/torchrun_report.py)
    refusals = [ln for ln in err.splitlines() if ln.startswith("error: ") and "refused to load" in ln]
    assert refusals and str(ckpt / ".metadata") in refusals[0] and "posix.system" in refusals[0], err[-3000:]
    assert not marker.exists()
    assert not (run / "checkpoints" / "step_00000020").exists()  # nothing trained from it
