"""How the matmul stress's sustained rate depends on its inputs and size under the GPU's power cap.

    python3 bench/stress_data_bench.py [--gpu 0] [--seconds 20] [--out FILE]

For each case, bf16 C = A @ B back to back for `--seconds`, then the rate over the second half (the
clocks have settled by then), the SM clock and the power drawn near the end. Tensor-core power grows
with how many input bits toggle, so under a power cap the same GPU sustains different rates on
different data; this prints the figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from typing import Any

import torch


def inputs(kind: str, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    def one() -> torch.Tensor:
        if kind == "normal":
            return torch.randn(n, n, generator=gen)
        if kind == "uniform":
            return torch.rand(n, n, generator=gen) * 2 - 1
        if kind == "int3":  # small integers: exact in bf16, few mantissa bits set
            return torch.randint(-3, 4, (n, n), generator=gen).float()
        if kind == "pm1":
            return torch.randint(0, 2, (n, n), generator=gen).float() * 2 - 1
        raise ValueError(kind)

    return one().to(torch.bfloat16), one().to(torch.bfloat16)


def smi(gpu: int) -> str:
    q = "clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.sw_power_cap"
    r = subprocess.run(["nvidia-smi", "-i", str(gpu), f"--query-gpu={q}", "--format=csv,noheader"],
                       capture_output=True, text=True, check=False)
    return r.stdout.strip()


def run(kind: str, n: int, seconds: float, dev: torch.device) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(7)
    a_h, b_h = inputs(kind, n, gen)
    a, b = a_h.to(dev), b_h.to(dev)
    c = torch.empty(n, n, dtype=torch.bfloat16, device=dev)
    per = max(1, int(4 * (8192 / n) ** 3))
    marks: list[tuple[float, torch.cuda.Event]] = []
    t0 = time.monotonic()
    snap = ""
    count = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(per):
            torch.matmul(a, b, out=c)
        count += per
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        marks.append((count, ev))
        if len(marks) > 2:
            marks[-3][1].synchronize()
        if not snap and time.monotonic() - t0 > seconds * 0.8:
            snap = smi(dev.index or 0)
    torch.cuda.synchronize(dev)
    half = [m for m in marks if m[0] >= count / 2]
    (c0, e0), (c1, e1) = half[0], half[-1]
    secs = e0.elapsed_time(e1) / 1e3
    return {"kind": kind, "n": n, "tflops_second_half": 2 * n**3 * (c1 - c0) / secs / 1e12, "smi_near_end": snap}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--cases", default="normal:8192,uniform:8192,int3:8192,pm1:8192,normal:16384")
    p.add_argument("--out")
    a = p.parse_args()
    dev = torch.device("cuda", a.gpu)
    rows = []
    for case in a.cases.split(","):
        kind, n = case.split(":")
        row = run(kind, int(n), a.seconds, dev)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
