"""The rendered Slurm batch script run under bash with stand-ins for Slurm's commands on PATH (scontrol, srun,
sinfo: one bash script whose cases the test writes), each call logged: what the script asks of Slurm, without
a Slurm. The real Slurm runs in tests/training/test_slurm_launch.py's requeue test (sim/slurm/lab.py)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("scontrol", "srun", "sinfo")
# What a two-node allocation's batch script sees (sbatch(1) OUTPUT ENVIRONMENT VARIABLES).
JOB_ENV = {"SLURM_JOB_ID": "41", "SLURM_JOB_NODELIST": "gpu-[a-b]", "SLURM_JOB_NUM_NODES": "2",
           "SLURM_CPUS_ON_NODE": "4"}


@dataclass(frozen=True)
class ScriptRun:
    returncode: int
    calls: list[str]  # every stand-in call, "<command> <args>", in order (and what --node-check echoed)
    events: list[dict[str, Any]]  # the supervisor's events (RUN/supervisor.jsonl)


def run_batch_script(text: str, workdir: Path, run_dir: Path, cases: str, env: dict[str, str] | None = None
                     ) -> ScriptRun:
    """Run the batch script `text` with `cases` (bash `case` arms on "<command> $1 $2") as every stand-in."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = f'#!/bin/bash\necho "$(basename "$0") $*" >> "$STUB_LOG"\ncase "$(basename "$0") $1 $2" in\n{cases}esac\n'
    for name in COMMANDS:
        (bin_dir / name).write_text(stub)
        (bin_dir / name).chmod(0o755)
    calls = workdir / "calls"
    calls.unlink(missing_ok=True)
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(calls), **JOB_ENV,
                "PYTHONPATH": str(REPO), **(env or {})}
    done = subprocess.run(["bash", "-c", text], env=full_env, cwd=REPO, timeout=120, check=False,
                          capture_output=True)
    events = [json.loads(line) for line in (run_dir / "supervisor.jsonl").read_text().splitlines()]
    return ScriptRun(done.returncode, calls.read_text().splitlines(), events)
