from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.addresses import free_port

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "training"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run([sys.executable, str(FIXTURES / "make_corpus.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def tokenizer_path(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.data import discover_files
    from training.tokenizer import train_tokenizer

    out = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(discover_files([corpus]), 300, out)
    return out


def torchrun_cmd(nproc: int, log_dir: Path, *target: str) -> list[str]:
    """`torchrun --standalone` of `target` (a script, or `-m MODULE`, and its arguments), its elastic agent's
    files under `log_dir`, as the launcher's are (training/launcher.py), not left in the machine's /tmp."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            f"--log-dir={log_dir}", *target]


def torchrun(args: list[str], nproc: int = 2, env: dict[str, str] | None = None, timeout: float = 240
             ) -> subprocess.CompletedProcess[str]:
    """The training worker under torchrun; its agent's files in RUN/torchelastic (RUN: its --run-dir)."""
    run_dir = Path(args[args.index("--run-dir") + 1])
    cmd = torchrun_cmd(nproc, run_dir / "torchelastic", "-m", "training", "train", *args)
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
    r = subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


# What torchrun gives a rank and what the trainer's build sets for its process group: undone after
_RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_TRACE_BUFFER_SIZE",
             "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ENABLE_TIMING",
             "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


@contextlib.contextmanager
def one_rank_here(env: dict[str, str] | None = None) -> Iterator[None]:
    """This process as the only rank of a gloo job (what `torchrun --nproc-per-node=1` gives its worker, one
    thread as the torchrun helper's OMP_NUM_THREADS=1), everything put back after: a single-rank run whose
    point is not the process boundary skips the ~12 s of imports a torchrun worker pays."""
    import torch
    import torch.distributed as dist

    extra = env or {}
    saved = {k: os.environ.get(k) for k in (*_RANK_ENV, *extra)}
    threads, collecting = torch.get_num_threads(), gc.isenabled()
    for key in _RANK_ENV:
        os.environ.pop(key, None)
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port()), **extra})
    torch.set_num_threads(1)
    try:
        yield
    finally:
        if dist.is_initialized():  # a run that raised, or was refused, after making its process group
            dist.destroy_process_group()
        torch.set_num_threads(threads)
        if collecting:
            gc.unfreeze()
            gc.enable()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def one_rank_group(env: dict[str, str] | None = None) -> Iterator[None]:
    """one_rank_here with its gloo process group made, for code that needs a group but no trainer (ended
    after, by one_rank_here)."""
    import torch.distributed as dist

    with one_rank_here(env):
        dist.init_process_group("gloo")
        yield


@pytest.fixture
def gloo_group() -> Iterator[None]:
    """This process as the only rank of a gloo job for the test (one_rank_group)."""
    with one_rank_group():
        yield


def train_here(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m training train ARGS` as one rank in this process (one_rank_here): its exit code and what it
    wrote to stderr."""
    from training.cli import main

    err = io.StringIO()
    with one_rank_here(env), contextlib.redirect_stderr(err):
        code = main(["train", *args])
    return code, err.getvalue()


def step_records(run_dir: Path, rank: int = 0) -> dict[int, dict[str, float]]:
    """The last record of each step (a restarted run logs a step again after resuming)."""
    out: dict[int, dict[str, float]] = {}
    for line in (run_dir / f"metrics_rank{rank}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "step":
            out[int(rec["step"])] = rec
    return out


def losses_by_attempt(run_dir: Path, rank: int = 0) -> list[dict[int, float]]:
    """A rank's losses per attempt (a restarted or requeued attempt logs the steps after its checkpoint again)."""
    out: list[dict[int, float]] = []
    for line in (run_dir / f"metrics_rank{rank}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "built":
            out.append({})
        elif rec["event"] == "step":
            out[-1][int(rec["step"])] = float(rec["loss"])
    return out


def tiny_args(corpus: Path, tok: Path, run_dir: Path, steps: int, ckpt_every: int, engine: str = "fsdp") -> list[str]:
    return ["--config", "tiny", "--engine", engine, "--run-dir", str(run_dir), "--data", str(corpus),
            "--tokenizer", str(tok), "--seq-len", "128", "--micro-batch", "2", "--steps", str(steps),
            "--warmup-steps", "2", "--lr", "3e-3", "--checkpoint-every", str(ckpt_every),
            "--loss-chunk-tokens", "96", "--keep-checkpoints", "3"]
