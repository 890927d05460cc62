"""On the lent H200: the MFU diagnosis on real runs of the job (one GPU, the tiny model, synthetic tokens), back
to back, each its own torchrun. `python3 bench/diagnosis_gpu.py --out DIR [--work TMP] [--budget-s S]`.

Cases (issue 20's evidence): `clean` (500 steps, a checkpoint every 100: no alert, the checkpoints labelled),
`gc_off` (TRAINING_INJECT=garbage:*:N with `--gc-every 0`: gc_decline), `gc_on` (the same garbage, the GC
controller collecting every 10 steps: no decline), `stalls` (TRAINING_INJECT=stall:0:0.03:0.2, the expectation
learnt by `clean`: random_stalls naming the host). A case is skipped once the budget is spent.

DIR/CASE/ holds what a replay of the diagnosis needs, trimmed: `metrics.jsonl` (each step's end time, step and
data seconds; the checkpoint events), `breakdown.jsonl`, `anomalies.jsonl` (what the live job reported), the
tail of the job log `train.log`, and `expected_steps.json` where one was learnt; DIR/summary.json the figures."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARGS = ["--config", "tiny", "--synthetic", "--seq-len", "128", "--micro-batch", "2", "--warmup-steps", "2",
        "--log-every", "50", "--keep-checkpoints", "2"]
GARBAGE = "garbage:*:2000"
# name, steps, TRAINING_INJECT, extra flags, store (cases sharing one judge against what the first learnt)
CASES: list[tuple[str, int, str, list[str], str]] = [
    ("clean", 500, "", ["--checkpoint-every", "100"], "shared"),
    ("gc_off", 300, GARBAGE, ["--checkpoint-every", "0", "--gc-every", "0"], "gc_off"),
    ("gc_on", 300, GARBAGE, ["--checkpoint-every", "0", "--gc-every", "10"], "gc_on"),
    ("stalls", 160, "stall:0:0.03:0.2", ["--checkpoint-every", "0"], "shared"),
]
STEP_FIELDS = ("event", "step", "time", "step_seconds", "data_seconds")


def run_case(work: Path, name: str, steps: int, inject: str, extra: list[str], store: str,
             timeout_s: float) -> Path:
    run_dir = work / name
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
           f"--log-dir={run_dir}/torchelastic", "-m", "training", "train", *ARGS, *extra, "--steps", str(steps),
           "--run-dir", str(run_dir)]
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TRAINING_HOST": "h200-0", "TRAINING_BREAKDOWN_EVERY": "25",
           "TRAINING_INJECT": inject, "TRAINING_EXPECTED_STORE": str(work / f"expected_{store}.json")}
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "train.log", "w") as log:
        log.write(" ".join(cmd) + f"\nTRAINING_INJECT={inject}\n")
        log.flush()
        try:
            subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            log.write(f"\ntimed out after {timeout_s:.0f} s\n")
    return run_dir


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def trim(run_dir: Path, dest: Path, store: Path) -> dict[str, object]:
    """Copy what a replay needs into `dest`; return the case's figures."""
    dest.mkdir(parents=True, exist_ok=True)
    rows = _rows(run_dir / "metrics_rank0.jsonl")
    kept = [{k: r[k] for k in STEP_FIELDS if k in r} if r["event"] == "step"
            else {k: r.get(k) for k in ("event", "step", "time", "blocking_seconds")}
            for r in rows if r["event"] in ("step", "checkpoint")]
    (dest / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    for name in ("breakdown.jsonl", "anomalies.jsonl"):
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, dest / name)
    if store.exists():
        shutil.copy(store, dest / "expected_steps.json")
    lines = (run_dir / "train.log").read_text(errors="replace").splitlines()
    short = lines if len(lines) <= 64 else [*lines[:3], "...", *lines[-60:]]
    (dest / "train.log").write_text("\n".join(short) + "\n")
    times = [float(str(r["step_seconds"])) for r in kept if r["event"] == "step" and int(str(r["step"])) > 5]
    anomalies = _rows(run_dir / "anomalies.jsonl")
    q = len(times) // 4
    return {"steps": len(times), "median_step_s": statistics.median(times) if times else None,
            "first_quarter_median_s": statistics.median(times[:q]) if q else None,
            "last_quarter_median_s": statistics.median(times[-q:]) if q else None,
            "alerts": [(a["kind"], a["hosts"]) for a in anomalies if a["alert"]],
            "labels": [a["kind"] for a in anomalies if not a["alert"]]}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/diagnosis_gpu"))
    p.add_argument("--budget-s", type=float, default=200.0, help="start no case after this many seconds")
    p.add_argument("--scale", type=float, default=1.0, help="steps x this (a short CPU rehearsal)")
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    summary: dict[str, object] = {"date": time.strftime("%Y-%m-%d", time.gmtime())}
    for name, steps, inject, extra, store in CASES:
        left = a.budget_s - (time.monotonic() - t0)
        if left < 20:
            summary[name] = "skipped: budget spent"
            continue
        t = time.monotonic()
        run_dir = run_case(a.work, name, max(int(steps * a.scale), 30), inject, extra, store, left)
        fig = trim(run_dir, a.out / name, a.work / f"expected_{store}.json")
        fig["wall_s"] = round(time.monotonic() - t, 1)
        summary[name] = fig
        print(name, json.dumps(fig), flush=True)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
