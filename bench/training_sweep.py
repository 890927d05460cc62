"""Several settings of the job on one machine, each its own torchrun, synthetic tokens and freshly
initialised weights (no Hugging Face folder, no data preparation): where the step's time and memory
go per setting. One JSON line per case in OUT/summary.jsonl (tokens/s, MFU, peak, reserved memory,
allocator retries, the plan); each job's metrics.jsonl and profile under OUT/<case>/.

    python3 bench/training_sweep.py --out $OUT --model llama3_8b --budget 400 \
        --case 'full:--activation-checkpoint full' --case 'k12:--activation-checkpoint selective --ac-layers 12' \
        --case 'k12_rs_pool:TRAINING_GRAD_POOL=reduce-scatter:--activation-checkpoint selective --ac-layers 12'

A case is NAME:FLAGS or NAME:ENV=VALUE,ENV=VALUE:FLAGS; FLAGS follow --common.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from training_real_data import _run, job_summary  # noqa: E402


def parse_case(spec: str) -> tuple[str, dict[str, str], list[str]]:
    """'NAME:FLAGS' or 'NAME:K=V,K=V:FLAGS' -> (name, env, flags)."""
    parts = spec.split(":", 2)
    if len(parts) == 3 and "=" in parts[1] and not parts[1].startswith("-"):
        env = dict(kv.split("=", 1) for kv in parts[1].split(",") if kv)
        return parts[0], env, parts[2].split()
    return parts[0], {}, spec.split(":", 1)[1].split() if ":" in spec else []


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--budget", type=float, default=400.0)
    p.add_argument("--common", default="--micro-batch 2 --grad-accum 1 --loss-chunk-tokens 8192 --compile 1 "
                                       "--reshard-after-forward 1")
    p.add_argument("--case", action="append", default=[])
    a = p.parse_args()
    start = time.monotonic()
    a.out.mkdir(parents=True, exist_ok=True)
    log = a.out / "sweep.log"
    for spec in a.case:
        name, env, flags = parse_case(spec)
        left = a.budget - (time.monotonic() - start)
        if left < 40:
            res: dict[str, object] = {"case": name, "skipped": "budget spent"}
        else:
            run_dir = a.out / name
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "-m",
                   "training", "train", "--config", a.model, "--synthetic", "--steps", str(a.steps),
                   "--warmup-steps", "2", "--checkpoint-every", "0", *a.common.split(), *flags,
                   "--run-dir", str(run_dir)]
            t = time.monotonic()
            rc, out = _run(cmd, log, left - 20, env)
            res = {"case": name, "rc": rc, "env": env, "wall_seconds": round(time.monotonic() - t, 1),
                   "command": " ".join(c.replace(str(ROOT) + "/", "") for c in cmd[1:]), **job_summary(run_dir)}
            if rc:
                res["tail"] = out[-1500:]
        with open(a.out / "summary.jsonl", "a") as f:
            f.write(json.dumps({"model": a.model, "date": time.strftime("%Y-%m-%d"), **res}) + "\n")
        print(json.dumps({k: v for k, v in res.items() if k not in ("tail", "losses", "command")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
