"""The demo's Slurm stage: the golden set as Slurm sees it, and a job Slurm places on it.

`provision slurm sync` (health, burn-in and the port plan already ended with one), Slurm's own `sinfo -R` (every
node out of service with its reason, who set it and when) and `sinfo`; then the training job submitted as a
batch job (`python -m training launch --scheduler slurm --nodes 1`): Slurm may only place it on a node that is
not drained, that is a golden host. After its checkpoint of step 4 that node is lost (sim/slurm/faults.py: its
slurmd and the job's processes killed, as a host that loses power); Slurm marks it down and requeues the job onto
another golden node, which resumes from the checkpoint; the closing sync records the lost node unknown. The
lab's slurmds run on this machine (sim/slurm/), so the job's rank runs here with this interpreter. What the job
did goes to `slurm-job.json` in the run directory, where `provision report` shows it beside the nodes' standings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from provision.cli import main as provision_main
from provision.command.output import console, esc
from provision.site import load_site
from report.gather_slurm import JOB_FILE
from sim.addresses import free_port as _free_port
from sim.slurm.faults import lose_node
from sim.slurm.lab import SlurmLab
from sim.slurm.service import spec_for
from training.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[1]
JOB_TIMEOUT_S = 240.0
STEPS = 12
EVERY = 4


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


def _wait(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def _requeue(run: Path) -> str:
    """What the job's restart record says: the node lost, with Slurm's word for it, the spare, the checkpoint."""
    events = read_jsonl(run / "supervisor.jsonl") if (run / "supervisor.jsonl").is_file() else []
    restart = next((e for e in events if e.get("event") == "restart"), None)
    if restart is None:
        return "none"
    dropped = ", ".join(f"{h} ({why})" for h, why in dict(restart.get("dropped") or {}).items())
    return (f"{dropped or '?'} lost; requeued by Slurm onto {', '.join(restart.get('added') or []) or '?'}, resumed "
            f"from {restart.get('checkpoint')} at step {restart.get('resume_step')}")


def _train(site_file: str, run_dir: Path, corpus: tuple[Path, Path]) -> int:
    runs = run_dir / "slurm-training"
    runs.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "training", "launch", "--scheduler", "slurm", "--nodes", "1", "--site", site_file,
            "--config", "tiny", "--gpus-per-host", "1", "--run-dir", str(runs / "tiny-{job_id}"),
            "--rdzv-port", str(_free_port()), "--max-restarts", "1", "--env", "OMP_NUM_THREADS=1",
            # the first attempt's steps take 0.6 s more, so the node is lost between two checkpoints
            "--env", "TRAINING_INJECT=stall:*:1.0:0.6", "--",
            "--data", str(corpus[0]), "--tokenizer", str(corpus[1]), "--seq-len", "128", "--micro-batch", "2",
            "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--warmup-steps", "2", "--lr", "3e-3",
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
    run = runs / f"tiny-{job_id}"
    start = time.monotonic()
    lost = ""
    if _wait(lambda: (run / "checkpoints" / f"step_{EVERY:08d}" / "COMPLETE").exists(), JOB_TIMEOUT_S):
        job = _job(job_id) or {}
        lost = str(job.get("nodes") or "")
        if lost:  # the node the job runs on loses power: slurmd and everything the job runs there
            lose_node(SlurmLab(Path(os.environ["SLURM_CONF"]).parent, spec_for(load_site(site_file))), lost)
            console.print(f"{esc(lost)} lost after the checkpoint of step {EVERY} (slurmd and the job's processes "
                          "killed): Slurm marks it down and requeues the job")
    _wait(lambda: (_job(job_id) or {}).get("job_state") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"),
          JOB_TIMEOUT_S)
    job = _job(job_id) or {}
    state = str(job.get("job_state") or "unknown")
    record = {"job_id": job_id, "state": state, "nodes": job.get("nodes"), "partition": job.get("partition"),
              "restarts": job.get("restart_cnt"), "lost_node": lost or None, "requeue": _requeue(run),
              "steps": STEPS, "run_dir": str(run), "wall_s": round(time.monotonic() - start, 1),
              "submitted_by": "python -m training launch --scheduler slurm"}
    metrics = run / "metrics.jsonl"
    steps = [e for e in read_jsonl(metrics) if e.get("event") == "step"] if metrics.is_file() else []
    if steps:
        record.update({"steps_done": steps[-1].get("step"), "final_loss": steps[-1].get("loss")})
    (run_dir / JOB_FILE).write_text(json.dumps(record, indent=1))
    console.print(f"job {esc(job_id)}: {esc(state)} on {esc(record['nodes'])} in {record['wall_s']} s, "
                  f"{esc(record['restarts'])} requeue(s): {esc(record['requeue'])}")
    return 0 if state == "COMPLETED" else 1


def run_slurm_stage(site_file: str, run_dir: Path, corpus: tuple[Path, Path] | None) -> int:
    code = provision_main(["slurm", "sync", "--site", site_file])
    code = max(code, _show(["sinfo", "-R", "-o", "%70E %9u %19H %N"]), _show(["sinfo"]))
    if corpus is None:
        console.print("no training corpus: no job submitted")
        return max(code, 1)
    code = max(code, _train(site_file, run_dir, corpus))
    # the lost node is golden in bringup and down in Slurm: the sync says unknown and records it
    return max(code, provision_main(["slurm", "sync", "--site", site_file]))
