from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def torchrun(args: list[str], nproc: int = 2, env: dict[str, str] | None = None, timeout: float = 240
             ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "training", "train", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
    r = subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def step_records(run_dir: Path, rank: int = 0) -> dict[int, dict[str, float]]:
    """The last record of each step (a restarted run logs a step again after resuming)."""
    out: dict[int, dict[str, float]] = {}
    for line in (run_dir / f"metrics_rank{rank}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "step":
            out[int(rec["step"])] = rec
    return out


def tiny_args(corpus: Path, tok: Path, run_dir: Path, steps: int, ckpt_every: int, engine: str = "fsdp") -> list[str]:
    return ["--config", "tiny", "--engine", engine, "--run-dir", str(run_dir), "--data", str(corpus),
            "--tokenizer", str(tok), "--seq-len", "128", "--micro-batch", "2", "--steps", str(steps),
            "--warmup-steps", "2", "--lr", "3e-3", "--checkpoint-every", str(ckpt_every),
            "--loss-chunk-tokens", "96", "--keep-checkpoints", "3"]
