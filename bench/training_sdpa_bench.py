"""Causal attention forward+backward time per SDPA kernel at a model's shape (bf16, GQA heads
expanded as `training.model` does). Prints one JSON line per kernel and `BEST <name>` last.

    python bench/training_sdpa_bench.py --model llama3_8b --batch 2 --seq 4096
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from training.configs import model_config


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama3_8b")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=4096)
    a = p.parse_args()
    m = model_config(a.model)
    dev = torch.device("cuda")
    shape = (a.batch, m.num_heads, a.seq, m.head_dim)
    q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(shape, device=dev, dtype=torch.bfloat16)
    # Causal attention work: QK^T and PV forward (2 matmuls), 2.5x that backward, half the square.
    flops = 4 * a.batch * m.num_heads * a.seq * a.seq * m.head_dim / 2 * 3.5
    results = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                for _ in range(3):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                n = 20
                start.record()
                for _ in range(n):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end) / n
            results[name] = ms
            print(json.dumps({"kernel": name, "ms_fwd_bwd": round(ms, 3), "tflops": round(flops / ms / 1e9, 1)}))
        except RuntimeError as e:
            print(json.dumps({"kernel": name, "error": str(e)[:200]}))
    print("BEST", min(results, key=lambda k: results[k]) if results else "auto", flush=True)


if __name__ == "__main__":
    main()
