"""Per-GPU memory budget for a model, an engine and a GPU count, before anything is launched.

Bytes per parameter (mixed precision, AdamW), sharded over G data-parallel ranks:
  FSDP2      fp32 sharded params 4 + fp32 sharded grads 4 + Adam m, v 8       = 16 / G
  ZeRO-3     bf16 params 2 + bf16 grads 2 + fp32 master, m, v 12              = 16 / G
(the ZeRO paper's 16Ψ/N_d). On top: unsharded working copies of the layers in flight (FSDP2:
the current and the prefetched layer, plus the root's embeddings and head; ZeRO-3: the prefetch
and reduce buckets, bounded by stage3_max_live_parameters), the fp32 gradients ZeRO-3 materialises for
the optimizer step (one sub-group at a time), activations, and the loss's logits.

Activations per token per decoder layer, bf16, fused attention (no s² term), as saved by
`training.model` in eager mode: 9·h + 4·f elements with no checkpointing (layer input, both norm
outputs, q and the GQA-expanded k and v, attention output and its o_proj copy, the residual,
SwiGLU's gate, up, silu(gate) and product); h (the layer input) with full checkpointing plus one
layer recomputed; op-level selective checkpointing keeps the matmul and attention outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from training.configs import ModelConfig

GIB = 2**30
# Allocator fragmentation, CUDA context, NCCL buffers: what a GPU cannot give to tensors.
RESERVED_GIB = 4.0
ENGINES = ("fsdp", "deepspeed")
AC_MODES = ("none", "selective", "ops", "full")
PLAN_ERROR = 0.10


@dataclass(frozen=True)
class Budget:
    engine: str
    gpus: int
    gpu_mem_gib: float
    micro_batch: int
    seq_len: int
    activation_checkpoint: str
    persistent_gib: float  # weights, optimizer state (and ZeRO-3's gradients): exact, no estimate in it
    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    working_gib: float  # gathered weights, buckets and reduce buffers at the peak
    total_gib: float  # peak tensor memory (compare with torch.cuda.max_memory_allocated)
    fits: bool
    forward_gib: float = 0.0  # the two phases the peak is the larger of: end of forward ...
    backward_gib: float = 0.0  # ... and end of backward

    @property
    def verdict(self) -> str:
        """'fits' with the plan's own error to spare (it was within 10% of measured peaks on H200),
        'tight' when only the point estimate fits, else 'does not fit'."""
        usable = self.gpu_mem_gib - RESERVED_GIB
        if self.total_gib * (1 + PLAN_ERROR) <= usable:
            return "fits"
        return "tight" if self.fits else "does not fit"


def activation_bytes_per_token_layer(m: ModelConfig, mode: str) -> float:
    h, f, kv = m.hidden_size, m.intermediate_size, m.kv_dim
    full = 2.0 * (9 * h + 4 * f)
    if mode == "none":
        return full
    if mode == "full":
        return 2.0 * h
    if mode == "ops":
        return 2.0 * (h + (h + 2 * kv) + h + h + 2 * f + h)
    if mode == "selective":  # every second layer fully checkpointed
        return (full + 2.0 * h) / 2
    raise ValueError(mode)


def plan(m: ModelConfig, engine: str, gpus: int, gpu_mem_gib: float, micro_batch: int = 1, seq_len: int = 4096,
         activation_checkpoint: str = "full", loss_chunk_tokens: int = 4096, grad_accum: int = 1,
         reshard_after_forward: bool = True, zero3_buckets: str = "layer", ac_layers: int = 0,
         logit_bytes: float = 10.0, layer_act_scale: float = 1.0) -> Budget:
    """Peak tensor memory = persistent state + the larger of two phases:
    end of forward (activations and logits live, gradients not yet) and end of backward (every
    gradient shard, plus the root's reduce-scatter input: FSDP2 reduces the unsharded embedding
    and head gradients in fp32 in one go; ZeRO-3 upcasts one optimizer sub-group to fp32).
    With gradient accumulation the shards of the earlier micro-batches are there at the end of the
    later forwards; without resharding after forward (FSDP2, or ZeRO-3 with every parameter kept
    live) every layer stays gathered in bf16. `layer_act_scale` scales what a decoder layer without
    checkpointing saves (1: the eager count; compiled layers save less, training.fit)."""
    n, g = m.num_params(), gpus
    tokens = micro_batch * seq_len
    layer, emb = m.layer_params(), m.embedding_params()
    head = m.vocab_size * m.hidden_size
    kept = activation_bytes_per_token_layer(m, "none") * layer_act_scale  # a layer's saved tensors
    acts = kept * tokens * m.num_layers if activation_checkpoint == "none" else \
        activation_bytes_per_token_layer(m, activation_checkpoint) * tokens * m.num_layers
    if activation_checkpoint == "selective" and ac_layers > 0:  # exactly ac_layers checkpointed
        k = min(ac_layers, m.num_layers)
        acts = (k * activation_bytes_per_token_layer(m, "full") + (m.num_layers - k) * kept) * tokens
    if activation_checkpoint in ("full", "selective"):
        acts += kept * tokens  # one layer recomputed in backward
    chunk = min(tokens, loss_chunk_tokens)
    # eager: fp32 log-probs saved, their fp32 grad, bf16 logits grad (10 bytes); the compiled loss
    # (FSDP2 --compile 1) keeps the bf16 logits and their bf16 grad (4 bytes)
    acts += chunk * m.vocab_size * logit_bytes
    acts += 2.0 * m.hidden_size * tokens * 2  # final norm in and out
    # the current and the prefetched layer, or all of them
    gathered_layers = 2 if reshard_after_forward else m.num_layers
    if engine == "fsdp":
        weights, grads, optim = 4.0 * n / g, 4.0 * n / g, 8.0 * n / g
        # root (embeddings, head) stays gathered in bf16
        working_fwd = 2.0 * emb + 2.0 * head + 2.0 * (gathered_layers * layer)
        if grad_accum > 1:
            working_fwd += grads
        end_bwd = grads + 4.0 * emb + 2.0 * emb
        if not reshard_after_forward:  # the gathered bf16 layers outlive the gradients' arrival: 8B on
            end_bwd += 2.0 * gathered_layers * layer  # 1 H200 reached 136.8 GiB at step 2 (issue 18)
    elif engine == "deepspeed":
        weights, grads, optim = 2.0 * n / g, 2.0 * n / g, 12.0 * n / g
        h = m.hidden_size
        prefetch, reduce = (layer, layer) if zero3_buckets == "layer" else (0.9 * h * h, h * h)
        working_fwd = 2.0 * (gathered_layers * layer) + 2.0 * head + 2.0 * prefetch + 2 * 2.0 * reduce
        end_bwd = 4.0 * min(1e9, n / g)
    else:
        raise ValueError(f"engine must be one of {ENGINES}")
    persistent = weights + optim + (grads if engine == "deepspeed" else 0.0)
    peak = persistent + max(acts + working_fwd, end_bwd)
    working = peak - persistent - acts - (grads if engine == "fsdp" and end_bwd > acts + working_fwd else 0.0)
    total = peak / GIB
    return Budget(engine, gpus, gpu_mem_gib, micro_batch, seq_len, activation_checkpoint, persistent / GIB,
                  weights / GIB,
                  grads / GIB, optim / GIB, acts / GIB, max(0.0, working) / GIB, total,
                  total + RESERVED_GIB <= gpu_mem_gib, (persistent + acts + working_fwd) / GIB,
                  (persistent + end_bwd) / GIB)


def vendor_gib(gb: float) -> float:
    """A GPU's "80 GB" or "141 GB" is what CUDA reports in GiB, not 1e9 bytes: an H100 80 GB has
    81,559 MiB (79.6 GiB), an A100 80 GB 81,920 MiB, an H200 141 GB 143,771 MiB (140.4 GiB); the
    0.5% margin covers the smallest of these, and RESERVED_GIB the CUDA context and NCCL."""
    return gb * 0.995


def min_gpus(m: ModelConfig, engine: str, gpu_mem_gib: float, seq_len: int = 4096) -> int | None:
    """Fewest GPUs on which one sequence per GPU fits with full activation checkpointing."""
    for g in range(1, 4097):
        if plan(m, engine, g, gpu_mem_gib, 1, seq_len, "full").verdict == "fits":
            return g
    return None


def lightest_fitting_mode(m: ModelConfig, engine: str, gpus: int, gpu_mem_gib: float, micro_batch: int,
                          seq_len: int) -> str | None:
    for mode in AC_MODES:
        if plan(m, engine, gpus, gpu_mem_gib, micro_batch, seq_len, mode).verdict == "fits":
            return mode
    return None
