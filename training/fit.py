"""A launch that fits: before the first step every rank computes the memory plan (`training.plan`)
for its exact settings and world size, and either runs them, replaces the model's defaults by
settings that fit, or stops with the plan and the settings that would fit.

The plan's persistent state (weights, gradients, optimizer: bytes per parameter) is exact; its
activation and working-memory terms are estimates, measured on H200 at up to 8.6% over the peak
for FSDP2 and up to 6.9% under it for ZeRO-3 (training/PERFORMANCE.md). So a setting "fits" here
when persistent + (1 + margin) x the rest, plus RESERVED_GIB, is within the GPU's memory, with
margin 5% for FSDP2 and 10% for ZeRO-3.

Settings the search picks must leave the allocator's headroom instead (`search_fits`): for FSDP2
the largest fragmentation measured on one H200 (reserved minus plan), for ZeRO-3 SEARCH_MARGIN.

`--auto-fit 1` searches micro-batch (keeping micro-batch x grad-accum, the tokens per rank per
optimizer step), activation checkpointing (none, k of L layers, full) and reshard-after-forward,
and takes the cheapest by a step-cost model: recomputing a layer's forward costs a third of that
layer's training FLOPs; resharding after forward costs 2% (the second all-gather, measured 2.8%
on 8B over 2x H200); a smaller micro-batch breaks ties.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace

from training.configs import ModelConfig, TrainConfig
from training.monitor import MetricsWriter, log
from training.plan import GIB, RESERVED_GIB, Budget, min_gpus, plan

MARGIN = {"fsdp": 0.05, "deepspeed": 0.10}
# ZeRO-3 settings the search picks: their estimated part must leave room for the caching allocator
# too (not measured for ZeRO-3 on one GPU; FSDP2 has its measured headroom below).
SEARCH_MARGIN = 0.15
RESHARD_COST = 0.02
COMPILED_LOGIT_BYTES = 4.0  # bf16 logits and their grad, with the compiled cross-entropy (training.model)
# Compiled decoder layers save less than the plan's eager count: 1 H200, 2026-12-02, the 8B peak grew
# 1.10 GiB per layer kept (4 vs 8 of 32 checkpointed: 128.5 vs 124.1 GiB) where the eager count is 1.44;
# with 0.8 the plan is 0.8-2.2% over every measured compiled 1-H200 peak (1B, 8B full and 4/8/12 of 32).
COMPILED_LAYER_ACT_SCALE = 0.8
# FSDP2 search headroom, measured on 1 H200 (2026-12-02, gradients from the compute stream's pool),
# per phase of the plan: where the end of backward sets the peak (8B full AC, 8 and 12 of 32 layers
# checkpointed) the allocator reserved up to 9.0 GiB above it, 0.30 of the 29.9 GiB of fp32 gradient
# shards (their per-layer blocks are carved from the freed activations); where the end of forward
# sets it (8B with 4, 5, 6 of 32 checkpointed) 5.1-5.8 GiB above it, 0.16 of the activations (1B:
# -0.3). The shares below cover every case measured; the allocator retried once reserved reached
# 138.5 of the 139.8 GiB CUDA reports (UNUSABLE_GIB).
FRAG_SHARE_OF_GRADS = 0.31
FRAG_SHARE_OF_ACTIVATIONS = 0.17
UNUSABLE_GIB = 1.3
# The flags that set memory: given any of them, the job runs what was asked or stops.
MEMORY_FLAGS = ("micro_batch", "grad_accum", "activation_checkpoint", "ac_layers", "reshard_after_forward")


class FitPlanError(RuntimeError):
    """The settings do not fit the GPU; the message carries the plan and what would fit."""


@dataclass(frozen=True)
class FitConfig:
    auto_fit: bool = False
    gpu_mem_gib: float | None = None  # None: what CUDA reports (no check on CPU)
    explicit: frozenset[str] = frozenset()  # the MEMORY_FLAGS given on the command line


@dataclass(frozen=True)
class FitDecision:
    train: TrainConfig
    budget: Budget
    action: str  # "as given" | "defaults replaced" | "auto-fit" | "tight"
    message: str


def add_fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auto-fit", type=int, choices=(0, 1), default=0,
                   help="choose micro-batch, activation checkpointing and reshard-after-forward from the memory plan")
    p.add_argument("--gpu-mem", type=float, default=None,
                   help="GiB per GPU to plan for (default: what CUDA reports for the device; none on CPU: no check)")


def budget_of(m: ModelConfig, engine: str, world: int, gpu_mem_gib: float, t: TrainConfig) -> Budget:
    compiled = bool(t.compile) and engine == "fsdp"
    return plan(m, engine, world, gpu_mem_gib, t.micro_batch, t.seq_len, t.activation_checkpoint,
                t.loss_chunk_tokens, t.grad_accum, t.reshard_after_forward, t.zero3_buckets, t.ac_layers,
                COMPILED_LOGIT_BYTES if compiled else 10.0, COMPILED_LAYER_ACT_SCALE if compiled else 1.0)


def fits(b: Budget, margin: float | None = None) -> bool:
    """Within the GPU with the plan's measured error (or `margin`) on its estimated, non-persistent part."""
    variable = b.total_gib - b.persistent_gib
    m = MARGIN.get(b.engine, 0.10) if margin is None else margin
    return b.persistent_gib + (1 + m) * variable + RESERVED_GIB <= b.gpu_mem_gib


def predicted_reserved_gib(b: Budget) -> float:
    """What the caching allocator reserves for an FSDP2 setting: each phase of the plan plus the
    fragmentation measured when that phase set the peak."""
    return max(b.forward_gib + FRAG_SHARE_OF_ACTIVATIONS * b.activations_gib,
               b.backward_gib + FRAG_SHARE_OF_GRADS * b.grads_gib)


def search_fits(b: Budget) -> bool:
    """A setting the search may pick: FSDP2's plan plus the measured allocator headroom within the
    GPU, so that the choice stays out of allocator retries (each costs a device-wide synchronisation:
    the 8B at 138.5 GiB reserved retried twice a step and ran 5-14% slower); ZeRO-3's plan with
    SEARCH_MARGIN on its estimated part."""
    if b.engine == "fsdp":
        return b.fits and predicted_reserved_gib(b) + UNUSABLE_GIB <= b.gpu_mem_gib
    return fits(b, max(SEARCH_MARGIN, MARGIN.get(b.engine, 0.10)))


def step_cost(m: ModelConfig, t: TrainConfig) -> float:
    """Relative step time per token: 1 plus recomputed forward work plus resharding."""
    layer_flops = 6.0 * m.num_layers * m.layer_params() + 12.0 * m.num_layers * m.hidden_size * t.seq_len
    layer_share = layer_flops / m.flops_per_token(t.seq_len)
    if t.activation_checkpoint == "full":
        checkpointed = 1.0
    elif t.activation_checkpoint == "selective":
        checkpointed = (min(t.ac_layers, m.num_layers) if t.ac_layers > 0
                        else len(range(0, m.num_layers, t.ac_every))) / m.num_layers
    elif t.activation_checkpoint == "ops":
        checkpointed = 0.1  # element-wise work only
    else:
        checkpointed = 0.0
    return 1.0 + checkpointed * layer_share / 3 + (RESHARD_COST if t.reshard_after_forward else 0.0)


def candidates(m: ModelConfig, t: TrainConfig) -> list[TrainConfig]:
    per_step = t.micro_batch * t.grad_accum
    out = []
    for mb in (d for d in range(per_step, 0, -1) if per_step % d == 0):
        for reshard in (False, True):
            base = replace(t, micro_batch=mb, grad_accum=per_step // mb, reshard_after_forward=reshard, ac_layers=0)
            out.append(replace(base, activation_checkpoint="none"))
            out += [replace(base, activation_checkpoint="selective", ac_layers=k) for k in range(1, m.num_layers)]
            out.append(replace(base, activation_checkpoint="full"))
    return out


def auto_fit(m: ModelConfig, engine: str, world: int, gpu_mem_gib: float, t: TrainConfig) -> TrainConfig | None:
    """The cheapest fitting settings with the same tokens per rank per optimizer step, or None."""
    fitting = [c for c in candidates(m, t) if search_fits(budget_of(m, engine, world, gpu_mem_gib, c))]
    if not fitting:
        return None
    return min(fitting, key=lambda c: (round(step_cost(m, c), 4), -c.micro_batch))


def describe(t: TrainConfig) -> str:
    ac = t.activation_checkpoint + (f" ({t.ac_layers} layers)" if t.activation_checkpoint == "selective"
                                    and t.ac_layers else "")
    return (f"--micro-batch {t.micro_batch} --grad-accum {t.grad_accum} --activation-checkpoint "
            f"{t.activation_checkpoint}{f' --ac-layers {t.ac_layers}' if t.ac_layers else ''} "
            f"--reshard-after-forward {int(t.reshard_after_forward)}  [{ac}]")


def _line(b: Budget) -> str:
    return (f"plan {b.total_gib:.1f} GiB of {b.gpu_mem_gib:.1f} (persistent {b.persistent_gib:.1f}, activations "
            f"{b.activations_gib:.1f}, working {b.working_gib:.1f}; {RESERVED_GIB:g} reserved)")


def decide(m: ModelConfig, engine: str, world: int, gpu_mem_gib: float, t: TrainConfig, auto: bool,
           explicit: set[str]) -> FitDecision:
    """What the job runs, or FitPlanError. Settings given on the command line are run as given when
    they fit, and stop the job when the plan is over the GPU's memory; the model's defaults that do
    not fit (with the margin) are replaced by the auto-fit choice."""
    b = budget_of(m, engine, world, gpu_mem_gib, t)
    pinned = bool(explicit & set(MEMORY_FLAGS))
    if not auto and fits(b):
        return FitDecision(t, b, "as given", f"{_line(b)}: fits")
    if not auto and pinned and b.fits:
        return FitDecision(t, b, "tight", f"{_line(b)}: tight (within the point estimate, not its error margin)")
    best = auto_fit(m, engine, world, gpu_mem_gib, t)
    if best is not None and (auto or not pinned):
        nb = budget_of(m, engine, world, gpu_mem_gib, best)
        why = "auto-fit" if auto else "defaults replaced"
        return FitDecision(best, nb, why, f"{why}: {describe(best)}; {_line(nb)}")
    hint = (f"settings that fit {world} GPU(s): {describe(best)}" if best is not None else
            f"nothing fits {world} GPU(s) of {gpu_mem_gib:.1f} GiB; fewest GPUs with full checkpointing, one "
            f"sequence each: {min_gpus(m, engine, gpu_mem_gib, t.seq_len)}")
    raise FitPlanError(f"{m.name} on {world} x {gpu_mem_gib:.1f} GiB ({engine}) with {describe(t)}: {_line(b)}, "
                    f"over the GPU's memory. {hint} (or pass --auto-fit 1)")


def device_mem_gib(device: object) -> float | None:
    import torch

    if not isinstance(device, torch.device) or device.type != "cuda":
        return None
    return float(torch.cuda.get_device_properties(device).total_memory) / GIB


def apply_fit(fit: FitConfig, engine: str, m: ModelConfig, t: TrainConfig, world: int,
              device: object) -> FitDecision | None:
    """The decision for this run (None when there is no GPU memory to plan for: CPU without --gpu-mem)."""
    mem = fit.gpu_mem_gib if fit.gpu_mem_gib is not None else device_mem_gib(device)
    if mem is None:
        return None
    return decide(m, engine, world, mem, t, fit.auto_fit, set(fit.explicit))


def plan_before_start(fit: FitConfig, engine: str, m: ModelConfig, t: TrainConfig, world: int, device: object,
                      metrics: MetricsWriter, rank: int) -> TrainConfig:
    """The settings this rank runs, or FitPlanError when the plan stops the job; the decision is logged
    and recorded as a `plan` event on every rank."""
    try:
        decision = apply_fit(fit, engine, m, t, world, device)
    except FitPlanError as e:
        metrics.event("plan", action="stopped", message=str(e))
        log(f"rank {rank}: {e}")
        raise
    if decision is None:
        return t
    metrics.event("plan", action=decision.action, message=decision.message, plan=asdict(decision.budget))
    if rank == 0:
        log(decision.message)
    return decision.train
