"""Which NCCL settings give the health agent's all-reduce its best bus bandwidth on one host.

    python3 bench/allreduce_env_bench.py [--repeats 2] [--iters 40] [--out FILE]

Runs the agent's own all-reduce worker (`tools.health.gpu_worker allreduce`, float32, 1/2/4 GiB)
once per NCCL setting and repeat, each in a fresh process so NCCL reads its environment anew, and
prints bus bandwidth per size (nccl-tests' formula). NVLink multicast stays off in every case.
It asserts nothing: the chosen setting goes into the site's health expectations.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES: dict[str, dict[str, str]] = {
    "nccl defaults": {},
    "min 32 channels": {"NCCL_MIN_NCHANNELS": "32"},
    "min 32, Simple protocol": {"NCCL_MIN_NCHANNELS": "32", "NCCL_PROTO": "Simple"},
    "min 32, 16 MiB buffers": {"NCCL_MIN_NCHANNELS": "32", "NCCL_BUFFSIZE": str(16 << 20)},
    "min 32, 512 threads": {"NCCL_MIN_NCHANNELS": "32", "NCCL_NTHREADS": "512"},
    "min 32, Simple, 16 MiB, 512 threads": {"NCCL_MIN_NCHANNELS": "32", "NCCL_PROTO": "Simple",
                                            "NCCL_BUFFSIZE": str(16 << 20), "NCCL_NTHREADS": "512"},
    "min 64 channels": {"NCCL_MIN_NCHANNELS": "64"},
    "min 24 channels": {"NCCL_MIN_NCHANNELS": "24"},
}


def run_case(env: dict[str, str], iters: int) -> dict[str, object]:
    full = {**os.environ, **env, "NCCL_NVLS_ENABLE": "0"}
    proc = subprocess.run([sys.executable, "-m", "tools.health.gpu_worker", "allreduce", "--sizes-mib",
                           "1024,2048,4096", "--iters", str(iters)], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=300, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": proc.stderr[-800:]}
    result: dict[str, object] = json.loads(lines[-1])
    return result


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    rows = []
    for repeat in range(args.repeats):
        for name, env in CASES.items():
            result = run_case(env, args.iters)
            busbw = [round(float(r["busbw_gbps"]), 1) for r in result.get("results", [])]  # type: ignore[union-attr]
            row = {"case": name, "env": env, "repeat": repeat, "busbw_gbps_1_2_4_gib": busbw,
                   "error": result.get("error"), "nccl": result.get("nccl")}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
