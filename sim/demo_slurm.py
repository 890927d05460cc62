"""The demo's Slurm stage: the golden set as Slurm sees it, and a job Slurm places on it.

`provision slurm sync` (health, burn-in and the port plan already ended with one), Slurm's own `sinfo -R` (every
node out of service with its reason, who set it and when) and `sinfo`; then the training job submitted as a
batch job (`python -m training launch --scheduler slurm --nodes 1`): Slurm may only place it on a node that is
not drained, that is a golden host. The lab's slurmds run on this machine (sim/slurm/), so the job's rank runs
here with this interpreter. What the job did goes to `slurm-job.json` in the run directory, where `provision
report` shows it beside the nodes' standings. Losing a node mid-job and the requeue onto a spare are in
tests/training/test_slurm_launch.py: after the supervised run the demo has no spare golden host left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.text import Text

from provision.cli import main as provision_main
from provision.cli.output import console, esc
from provision.report.gather_slurm import JOB_FILE
from training.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[1]
JOB_TIMEOUT_S = 240.0
STEPS = 8


def _show(argv: list[str]) -> int:
    console.print(f"$ {' '.join(argv)}", style="dim", markup=False)
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    console.print(Text(shown.stdout + shown.stderr))  # Slurm's text as it is, never read as markup
    return 0 if shown.returncode == 0 else 1


def _job(job_id: str) -> dict[str, Any] | None:
    out = subprocess.run(["squeue", "--json", "--states=all", "--jobs", job_id], capture_output=True, text=True,
                         timeout=60, check=False)
    try:
        jobs = json.loads(out.stdout).get("jobs") or []
    except ValueError:
        return None
    return next((j for j in jobs if str(j.get("job_id")) == job_id), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _train(site_file: str, run_dir: Path, corpus: tuple[Path, Path]) -> int:
    runs = run_dir / "slurm-training"
    runs.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "training", "launch", "--scheduler", "slurm", "--nodes", "1", "--site", site_file,
            "--config", "tiny", "--gpus-per-host", "1", "--run-dir", str(runs / "tiny-{job_id}"),
            "--rdzv-port", str(_free_port()), "--max-restarts", "1", "--env", "OMP_NUM_THREADS=1", "--",
            "--data", str(corpus[0]), "--tokenizer", str(corpus[1]), "--seq-len", "128", "--micro-batch", "2",
            "--steps", str(STEPS), "--checkpoint-every", "4", "--warmup-steps", "2", "--lr", "3e-3",
            "--loss-chunk-tokens", "96"]
    console.print("$ python -m training launch --scheduler slurm --nodes 1 --config tiny ...", style="dim",
                  markup=False)
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    console.print(Text((out.stdout + out.stderr).strip()))
    words = out.stdout.split()
    if out.returncode != 0 or len(words) < 4:
        return 1
    job_id = words[3].rstrip(":")
    start = time.monotonic()
    job = _job(job_id)
    while job is not None and job.get("job_state") in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") and \
            time.monotonic() - start < JOB_TIMEOUT_S:
        time.sleep(1.0)
        job = _job(job_id)
    state = str(job.get("job_state")) if job else "unknown"
    nodes = str(job.get("nodes")) if job else "?"
    run = runs / f"tiny-{job_id}"
    record = {"job_id": job_id, "state": state, "nodes": nodes, "partition": job.get("partition") if job else None,
              "restarts": job.get("restart_cnt") if job else None, "steps": STEPS, "run_dir": str(run),
              "wall_s": round(time.monotonic() - start, 1),
              "submitted_by": "python -m training launch --scheduler slurm"}
    metrics = run / "metrics.jsonl"
    steps = [e for e in read_jsonl(metrics) if e.get("event") == "step"] if metrics.is_file() else []
    if steps:
        record.update({"steps_done": steps[-1].get("step"), "final_loss": steps[-1].get("loss")})
    (run_dir / JOB_FILE).write_text(json.dumps(record, indent=1))
    console.print(f"job {esc(job_id)}: {esc(state)} on {esc(nodes)} in {record['wall_s']} s (Slurm placed it on a "
                  "node that is not drained: a golden host)")
    return 0 if state == "COMPLETED" else 1


def run_slurm_stage(site_file: str, run_dir: Path, corpus: tuple[Path, Path] | None) -> int:
    code = provision_main(["slurm", "sync", "--site", site_file])
    code = max(code, _show(["sinfo", "-R", "-o", "%70E %9u %19H %N"]), _show(["sinfo"]))
    if corpus is None:
        console.print("no training corpus: no job submitted")
        return max(code, 1)
    return max(code, _train(site_file, run_dir, corpus))
