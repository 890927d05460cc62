"""The Slurm job's bookkeeping, run by its batch script (training/slurm_launch.py) on the job's first node:
each attempt's start, a restart for every requeue and how the attempt ended, in RUN/supervisor.jsonl with the
SSH supervisor's events and fields (`provision report` and `python -m training report` read either).

    python -m training.slurm_events start --run-dir R --attempt N --hosts a,b --job-id J
    python -m training.slurm_events end --run-dir R --attempt N --outcome finished|requeue|gave_up --exit-code C

A restart (attempt > 0) compares the allocation with the previous attempt's: the nodes dropped (with the state
and reason Slurm gives them now, e.g. `down*: Not responding` or a health check's drain) and the nodes added,
the checkpoint the job resumes from and its step. Its cause is `failed` when the script requeued the job after
a failed step, `requeued` when Slurm did (a node of the job failed) or someone else did (`scontrol requeue`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from training.jsonl import read_jsonl
from training.supervisor import checkpoint_world, record

ENDS = ("finished", "requeue", "gave_up")
MAX_ROWS_BYTES = 8 << 20


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "supervisor.jsonl"
    if not path.is_file() or path.stat().st_size > MAX_ROWS_BYTES:
        return []
    return read_jsonl(path, MAX_ROWS_BYTES)


def node_state(node: str, timeout_s: float = 20.0) -> str:
    """What Slurm says of a node now: `state: reason` (sinfo's extended state, e.g. `down*`), or unknown."""
    try:
        r = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], capture_output=True, text=True,
                           timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    line = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    state, _, reason = line.partition("|")
    if not state:
        return "unknown"
    return f"{state}: {reason}" if reason and reason != "none" else state


def previous_attempt(rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The last start and the end that followed it (None: the attempt was ended from outside)."""
    starts = [i for i, r in enumerate(rows) if r.get("event") == "start"]
    if not starts:
        return None, None
    ends = [r for r in rows[starts[-1] + 1:] if r.get("event") in ENDS]
    return rows[starts[-1]], (ends[-1] if ends else None)


def start(run_dir: Path, attempt: int, hosts: list[str], job_id: str) -> None:
    name, _, step = checkpoint_world(run_dir)
    before, ended = previous_attempt(_rows(run_dir))
    if attempt > 0 and before is not None:
        old = [str(h) for h in before.get("hosts") or []]
        failed = ended is not None and ended.get("event") == "requeue"
        record(run_dir, "restart", attempt=attempt, cause="failed" if failed else "requeued", kind=None,
               failed={}, exit_code=ended.get("exit_code") if ended else None,
               dropped={h: node_state(h) for h in old if h not in hosts}, added=[h for h in hosts if h not in old],
               hosts=hosts, checkpoint=name, resume_step=step, scheduler="slurm", job_id=job_id)
    record(run_dir, "start", attempt=attempt, hosts=hosts, checkpoint=name, scheduler="slurm", job_id=job_id)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.slurm_events")
    p.add_argument("what", choices=("start", "end"))
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attempt", type=int, required=True)
    p.add_argument("--hosts", default="")
    p.add_argument("--job-id", default="")
    p.add_argument("--outcome", choices=ENDS)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--reason", default="restart limit reached", help="why the job gave up (with gave_up)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.what == "start":
        start(a.run_dir, a.attempt, [h for h in a.hosts.split(",") if h], a.job_id)
    elif a.outcome is None:
        p.error("end needs --outcome")
    else:
        record(a.run_dir, a.outcome, attempt=a.attempt, exit_code=a.exit_code, scheduler="slurm",
               **({"reason": a.reason[:500]} if a.outcome == "gave_up" else {}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
