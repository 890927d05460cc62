"""`python -m training plan`: the memory budget of a model on N GPUs, per engine and checkpointing mode."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from training.configs import model_config
from training.exits import OK, PROBLEMS
from training.fit import auto_fit, describe
from training.plan import AC_MODES, ENGINES, RESERVED_GIB, lightest_fitting_mode, min_gpus, plan, vendor_gib


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training plan")
    p.add_argument("--config", required=True)
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--gpu-mem", type=float, required=True, help="memory per GPU as the vendor names it (80, 141)")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--no-reshard", action="store_true",
                   help="layers stay gathered between forward and backward (FSDP2), every parameter live (ZeRO-3)")
    p.add_argument("--zero3-buckets", choices=("layer", "hidden"), default="layer")
    p.add_argument("--activation-checkpoint", choices=AC_MODES, default=None,
                   help="default: the lightest mode that fits")
    p.add_argument("--json", action="store_true")
    p.add_argument("--auto-fit", action="store_true",
                   help="also print what `train --auto-fit 1` would choose for this config (FSDP2)")
    a = p.parse_args(argv)
    m = model_config(a.config)
    mem_gib = vendor_gib(a.gpu_mem)
    rows = []
    for engine in ENGINES:
        mode = a.activation_checkpoint or lightest_fitting_mode(m, engine, a.gpus, mem_gib, a.micro_batch,
                                                                 a.seq_len) or "full"
        b = plan(m, engine, a.gpus, mem_gib, a.micro_batch, a.seq_len, mode, grad_accum=a.grad_accum,
                 reshard_after_forward=not a.no_reshard, zero3_buckets=a.zero3_buckets)
        rows.append({**asdict(b), "verdict": b.verdict,
                     "min_gpus_full_checkpointing": min_gpus(m, engine, mem_gib, a.seq_len)})
    if a.json:
        print(json.dumps({"model": m.name, "params": m.num_params(), "budgets": rows}, indent=2))
        return OK if all(r["verdict"] == "fits" for r in rows) else PROBLEMS
    print(f"{m.name}: {m.num_params() / 1e9:.2f}B parameters, {a.gpus} x {a.gpu_mem:g} GB "
          f"({mem_gib:.1f} GiB), micro-batch {a.micro_batch} x {a.seq_len} tokens")
    hdr = f"{'engine':10} {'ckpt':9} {'weights':>8} {'grads':>8} {'optim':>8} {'activ':>8} {'working':>8} " \
          f"{'peak':>8}  verdict       min GPUs"
    print(hdr)
    for r in rows:
        print(f"{r['engine']:10} {r['activation_checkpoint']:9} {r['weights_gib']:8.1f} {r['grads_gib']:8.1f} "
              f"{r['optimizer_gib']:8.1f} {r['activations_gib']:8.1f} {r['working_gib']:8.1f} {r['total_gib']:8.1f}"
              f"  {r['verdict']:13} {r['min_gpus_full_checkpointing']}")
    if a.auto_fit:
        from training.configs import recommended_train

        best = auto_fit(m, "fsdp", a.gpus, mem_gib, recommended_train(a.config))
        print(f"auto-fit (FSDP2, from {a.config}'s run settings): " +
              (describe(best) if best is not None else "nothing fits"))
    print(f"(GiB per GPU; peak = persistent state + the larger of end-of-forward and end-of-backward; fits "
          f"leaves {RESERVED_GIB:g} GiB for CUDA context, NCCL and fragmentation; 'min GPUs': fewest GPUs of "
          f"this size for one sequence each with full checkpointing)")
    return OK if all(r["verdict"] == "fits" for r in rows) else PROBLEMS
