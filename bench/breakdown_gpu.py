"""On the lent H200: what the per-rank breakdown costs and what the diagnosis says of a real run with one
injected slowdown. `python3 bench/breakdown_gpu.py --out DIR`.

Runs (llama3_1b, FSDP2, one GPU, synthetic tokens, sequence 2048, micro-batch 4, no compile), each its own
torchrun: off, on, off, on (breakdown every 10 steps with TORCH_NCCL_ENABLE_TIMING=1, against
TRAINING_BREAKDOWN_EVERY=0 and timing off), then on with `TRAINING_INJECT=stall:0:0.03:1.0` (a 1 s stall on
3% of the steps). The first healthy "on" run teaches the expected step; the injected run is judged against
it. Writes DIR/summary.json (median step times, overhead, the injected run's anomalies)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ARGS = ["--config", "llama3_1b", "--engine", "fsdp", "--synthetic", "--seq-len", "2048", "--micro-batch", "4",
        "--warmup-steps", "2", "--checkpoint-every", "0", "--log-every", "10"]


def run(out: Path, name: str, steps: int, env: dict[str, str]) -> dict[str, object]:
    run_dir = out / name
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
           f"--log-dir={run_dir}/torchelastic", "-m", "training", "train", *ARGS, "--steps", str(steps),
           "--run-dir", str(run_dir)]
    full = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TRAINING_HOST": "h200-0",
            "TRAINING_EXPECTED_STORE": str(out / "expected_steps.json"), **env}
    r = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=240, check=False)
    (out / f"{name}.log").write_text(r.stdout[-20000:] + r.stderr[-20000:])
    steps_s = [json.loads(line) for line in (run_dir / "metrics_rank0.jsonl").read_text().splitlines()] \
        if (run_dir / "metrics_rank0.jsonl").exists() else []
    times = [float(e["step_seconds"]) for e in steps_s if e.get("event") == "step" and int(e["step"]) > 5]
    anomalies = (run_dir / "anomalies.jsonl").read_text().splitlines() if (run_dir / "anomalies.jsonl").exists() \
        else []
    return {"rc": r.returncode, "median_step_s": statistics.median(times) if times else None, "steps": len(times),
            "anomalies": [json.loads(a) for a in anomalies]}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=50)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    off = {"TRAINING_BREAKDOWN_EVERY": "0", "TORCH_NCCL_ENABLE_TIMING": "0"}
    on = {"TRAINING_BREAKDOWN_EVERY": "10", "TORCH_NCCL_ENABLE_TIMING": "1"}
    res = {}
    for name, env in (("off0", off), ("on0", on), ("off1", off), ("on1", on)):
        res[name] = run(a.out, name, a.steps, env)
        print(name, json.dumps(res[name])[:400], flush=True)
    res["injected"] = run(a.out, "injected", 160, {**on, "TRAINING_INJECT": "stall:0:0.03:1.0"})
    print("injected", json.dumps(res["injected"])[:2000], flush=True)
    offs = [x for x in (res[n]["median_step_s"] for n in ("off0", "off1")) if isinstance(x, float)]
    ons = [x for x in (res[n]["median_step_s"] for n in ("on0", "on1")) if isinstance(x, float)]
    summary: dict[str, object] = dict(res)
    if offs and ons:
        summary["overhead"] = statistics.mean(ons) / statistics.mean(offs) - 1
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("overhead", summary.get("overhead"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
