"""The off-the-shelf baseline the job is measured against, run in the same session as the job:
Hugging Face transformers' LlamaForCausalLM with SDPA attention, FSDP2 `fully_shard` per decoder
layer and on the root (bf16 params, fp32 reduce), fused AdamW, no activation checkpointing,
uniform random tokens. Prints one JSON line per step on rank 0 and a summary at the end.

    torchrun --nproc-per-node 2 bench/training_baseline_hf.py --model llama3_8b --seq 4096 --batch 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama3_8b")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", default="")
    p.add_argument("--ac", choices=("none", "full"), default="none",
                   help="full: transformers' gradient checkpointing on every decoder layer")
    a = p.parse_args()
    from transformers import LlamaConfig, LlamaForCausalLM

    from training.configs import model_config
    from training.monitor import mfu, peak_tflops

    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    m = model_config(a.model)
    hf_cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
                         num_hidden_layers=m.num_layers, num_attention_heads=m.num_heads,
                         num_key_value_heads=m.num_kv_heads, rope_theta=m.rope_theta, rms_norm_eps=m.rms_norm_eps,
                         max_position_embeddings=m.max_seq_len, tie_word_embeddings=False,
                         attn_implementation="sdpa", use_cache=False)
    with torch.device("meta"):
        model = LlamaForCausalLM(hf_cfg)
    if a.ac == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device=device)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.Linear | torch.nn.Embedding):
                torch.nn.init.normal_(mod.weight, std=0.02)
            elif hasattr(mod, "weight") and mod.weight is not None and mod.weight.ndim == 1:
                torch.nn.init.ones_(mod.weight)
        rope = model.model.rotary_emb
        d = m.head_dim
        inv = 1.0 / (m.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
        rope.inv_freq.copy_(inv)
        rope.original_inv_freq.copy_(inv)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    gen = torch.Generator().manual_seed(rank)
    times: list[float] = []
    for step in range(1, a.steps + 1):
        ids = torch.randint(0, m.vocab_size, (a.batch, a.seq), generator=gen).to(device)
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        if step > a.warmup:
            times.append(dt)
        if rank == 0:
            print(json.dumps({"step": step, "loss": float(loss), "seconds": dt}), flush=True)
    sec = statistics.median(times)
    tps = a.batch * a.seq / sec
    peak = peak_tflops(torch.cuda.get_device_name(device)) if cuda else None
    summary = {"case": "hf_baseline", "model": a.model, "world": world, "batch": a.batch, "seq": a.seq, "ac": a.ac,
               "step_seconds": sec, "tokens_per_s_per_gpu": tps, "mfu": mfu(tps, m.flops_per_token(a.seq), peak),
               "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else 0.0}
    if rank == 0:
        print("SUMMARY " + json.dumps(summary), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(summary) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
