"""Llama decoder (RMSNorm, RoPE, GQA, SwiGLU) in plain PyTorch modules.

Parameter names follow Hugging Face's `LlamaForCausalLM` (model.layers.N.self_attn.q_proj.weight, …)
so that merged checkpoints load there unchanged. Attention goes through
`torch.nn.functional.scaled_dot_product_attention` (FlashAttention / cuDNN / memory-efficient
kernels on GPU). The loss is computed in token chunks under activation checkpointing so the
fp32 logits of a 128k vocabulary are never materialised for the whole batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from training.configs import ModelConfig

IGNORE_INDEX = -100


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim))
        self.norm_fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] = _rms_norm
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_fn(x, self.weight, self.eps)


def llama3_scaled(inv: torch.Tensor, scaling: tuple[float, float, float, int]) -> torch.Tensor:
    """Llama 3.1's frequency-dependent RoPE scaling: long wavelengths slowed by `factor`, short ones
    kept, the band between interpolated (as Meta's reference and transformers' `llama3` rope type)."""
    factor, low, high, original = scaling
    low_wavelen, high_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_tables(head_dim: int, max_len: int, theta: float, device: torch.device | None = None,
                scaling: tuple[float, float, float, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim))
    if scaling is not None:
        inv = llama3_scaled(inv, scaling)
    t = torch.arange(max_len, dtype=torch.float64, device=device)
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, H, S, D]; cos/sin: [B, 1, S, D] gathered at the tokens' position ids."""
    return x * cos + _rotate_half(x) * sin


def _rope_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin)


class Linear(nn.Linear):
    def __init__(self, fan_in: int, fan_out: int, std: float) -> None:
        self.init_std = std
        super().__init__(fan_in, fan_out, bias=False)

    def reset_parameters(self) -> None:
        nn.init.trunc_normal_(self.weight, mean=0.0, std=self.init_std, a=-3 * self.init_std,
                              b=3 * self.init_std)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        out_std = cfg.init_std / math.sqrt(2 * (layer_idx + 1))
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, d
        self.q_proj = Linear(h, cfg.num_heads * d, cfg.init_std)
        self.k_proj = Linear(h, cfg.kv_dim, cfg.init_std)
        self.v_proj = Linear(h, cfg.kv_dim, cfg.init_std)
        self.o_proj = Linear(cfg.num_heads * d, h, out_std)
        self.rope_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] = _rope_qk

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor | BlockMask | None) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope_fn(q, k, cos, sin)
        rep = self.num_heads // self.num_kv_heads
        if isinstance(mask, BlockMask):  # within documents, only the blocks that have any pair computed
            o = _flex(q.is_cuda)(q, k, v, block_mask=mask, enable_gqa=rep > 1)
            out: torch.Tensor = self.o_proj(o.transpose(1, 2).reshape(b, s, -1))
            return out
        if rep > 1:
            # Explicit repeat rather than enable_gqa: every fused SDPA backend accepts it.
            k = k[:, :, None].expand(b, self.num_kv_heads, rep, s, self.head_dim).reshape(b, -1, s, self.head_dim)
            v = v[:, :, None].expand(b, self.num_kv_heads, rep, s, self.head_dim).reshape(b, -1, s, self.head_dim)
        if mask is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = self.o_proj(o.transpose(1, 2).reshape(b, s, -1))
        return out


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        out_std = cfg.init_std / math.sqrt(2 * (layer_idx + 1))
        self.gate_proj = Linear(cfg.hidden_size, cfg.intermediate_size, cfg.init_std)
        self.up_proj = Linear(cfg.hidden_size, cfg.intermediate_size, cfg.init_std)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size, out_std)
        self.act_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _swiglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(self.act_fn(self.gate_proj(x), self.up_proj(x)))
        return out


_SAVE_OPS: set[Any] = set()


def _ops_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """Op-level selective checkpointing: keep matmul and attention outputs, recompute the rest."""
    from torch.utils.checkpoint import CheckpointPolicy

    if not _SAVE_OPS:
        aten = torch.ops.aten
        for name in ("mm", "addmm", "bmm", "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                     "_scaled_dot_product_flash_attention_for_cpu"):
            if hasattr(aten, name):
                _SAVE_OPS.add(getattr(aten, name).default)
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, layer_idx)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg, layer_idx)
        self.checkpoint_mode = "none"

    def _block(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               mask: torch.Tensor | BlockMask | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        out: torch.Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor | BlockMask | None) -> torch.Tensor:
        if self.checkpoint_mode == "full" and torch.is_grad_enabled():
            out: torch.Tensor = checkpoint(self._block, x, cos, sin, mask, use_reentrant=False)
            return out
        if self.checkpoint_mode == "ops" and torch.is_grad_enabled():
            ctx = partial(create_selective_checkpoint_contexts, _ops_policy)
            out = checkpoint(self._block, x, cos, sin, mask, use_reentrant=False, context_fn=ctx)
            return out
        return self._block(x, cos, sin, mask)


class LlamaBody(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Llama(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = LlamaBody(cfg)
        self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size, cfg.init_std)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # RoPE tables are recomputed rather than stored: they never enter a checkpoint and are
        # correct after a meta-device build.
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None
        self.loss_chunk_tokens = 4096
        self.ce_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _ce_sum
        self.document_attention = "flex"  # with doc_ids: "flex" (block mask) or "dense" ([B, 1, S, S] mask)
        self.init_weights()

    def init_weights(self) -> None:
        nn.init.normal_(self.model.embed_tokens.weight, std=1.0)
        for m in self.modules():
            if isinstance(m, Linear | RMSNorm):
                m.reset_parameters()

    def compile_pointwise(self) -> None:
        """Compile only the parameter-free element-wise functions (RMSNorm, RoPE, SwiGLU), for
        engines whose per-module hooks keep whole layers from being compiled."""
        norm, rope, act = torch.compile(_rms_norm), torch.compile(_rope_qk), torch.compile(_swiglu)
        for m in self.modules():
            if isinstance(m, RMSNorm):
                m.norm_fn = norm
            elif isinstance(m, Attention):
                m.rope_fn = rope
            elif isinstance(m, MLP):
                m.act_fn = act

    def set_activation_checkpointing(self, mode: str, every: int = 2, layers: int = 0) -> None:
        """none | full (every layer) | selective (every `every`-th layer, full; or exactly `layers`
        of them when `layers` > 0: the first ones) | ops (op-level).

        With `layers`, the checkpointed layers are the first ones: backward runs from the last layer
        down, so the kept activations of the last layers are freed first, while few gradients exist
        yet, and the peak stays the larger of the end of forward and the end of backward. Kept
        activations of early layers (evenly spread) would live until the end of backward, beside
        almost every gradient."""
        for i, layer in enumerate(self.model.layers):
            assert isinstance(layer, DecoderLayer)
            if mode == "selective":
                chosen = i < layers if layers > 0 else i % every == 0
                layer.checkpoint_mode = "full" if chosen else "none"
            else:
                layer.checkpoint_mode = mode

    def compile_loss(self) -> None:
        """Compile the cross-entropy of each chunk: the fp32 upcast, log-sum-exp and its gradient
        become fused kernels that read the bf16 logits once, instead of materialising fp32 copies."""
        self.ce_fn = torch.compile(_ce_sum)

    def _rope_at(self, position_ids: torch.Tensor, device: torch.device
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        if self._rope is None or self._rope[0].device != device:
            self._rope = rope_tables(self.cfg.head_dim, self.cfg.max_seq_len, self.cfg.rope_theta, device,
                                     self.cfg.rope_scaling)
        cos, sin = self._rope
        return cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)

    def hidden_states(self, input_ids: torch.Tensor, position_ids: torch.Tensor,
                      doc_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.model.embed_tokens(input_ids)
        cos, sin = self._rope_at(position_ids, x.device)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        mask: torch.Tensor | BlockMask | None = None
        if doc_ids is not None:
            # PyTorch's flex_attention has no CPU backward: CPU training takes the dense mask
            flex = self.document_attention == "flex" and (doc_ids.is_cuda or not torch.is_grad_enabled())
            mask = document_block_mask(doc_ids) if flex else document_mask(doc_ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        out: torch.Tensor = self.model.norm(x)
        return out

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, labels: torch.Tensor | None = None,
                doc_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Returns the summed token loss (fp32) over labels != -100 (the caller normalises), or the
        logits when no labels are given (through the engines' hooks, unlike `logits`)."""
        h = self.hidden_states(input_ids, position_ids, doc_ids)
        if labels is None:
            out: torch.Tensor = self.lm_head(h)
            return out
        return chunked_cross_entropy_sum(h, self.lm_head, labels, self.loss_chunk_tokens, self.ce_fn)

    def logits(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        h = self.hidden_states(input_ids, position_ids)
        out: torch.Tensor = self.lm_head(h)
        return out


_FLEX_COMPILED: list[Callable[..., torch.Tensor]] = []


def _flex(cuda: bool) -> Callable[..., torch.Tensor]:
    """flex_attention, compiled on GPU (its fused kernel; eager flex materialises the scores). On
    CPU the eager form: the reference the tests hold it to."""
    if not cuda:
        return flex_attention
    if not _FLEX_COMPILED:
        _FLEX_COMPILED.append(torch.compile(flex_attention, dynamic=False))
    return _FLEX_COMPILED[0]


def document_block_mask(doc_ids: torch.Tensor) -> BlockMask:
    """[B, S] document ids -> flex_attention's block-sparse block-causal mask: the same pairs as
    `document_mask`, with no [S, S] tensor, and blocks wholly outside a document skipped."""
    b, s = doc_ids.shape

    def same_doc_causal(bi: torch.Tensor, hi: torch.Tensor, qi: torch.Tensor, ki: torch.Tensor) -> torch.Tensor:
        return (doc_ids[bi, qi] == doc_ids[bi, ki]) & (qi >= ki)

    return create_block_mask(same_doc_causal, b, None, s, s, device=doc_ids.device)


def document_mask(doc_ids: torch.Tensor) -> torch.Tensor:
    """[B, S] document ids -> [B, 1, S, S] boolean block-causal mask (True = attend)."""
    s = doc_ids.shape[1]
    causal = torch.ones(s, s, dtype=torch.bool, device=doc_ids.device).tril()
    same = doc_ids[:, :, None] == doc_ids[:, None, :]
    return (same & causal)[:, None]


def _ce_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX, reduction="sum")


def _chunk_loss(h: torch.Tensor, head: nn.Module, labels: torch.Tensor,
                ce: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _ce_sum) -> torch.Tensor:
    return ce(head(h), labels)


def chunked_cross_entropy_sum(h: torch.Tensor, head: nn.Module, labels: torch.Tensor, chunk_tokens: int,
                              ce: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _ce_sum) -> torch.Tensor:
    """Summed token loss, `chunk_tokens` rows of logits at a time, each chunk recomputed in the
    backward pass. The head is called as a module so ZeRO-3's gather hooks see it."""
    flat_h = h.reshape(-1, h.shape[-1])
    flat_y = labels.reshape(-1)
    total = flat_h.new_zeros((), dtype=torch.float32)
    fn: Callable[..., torch.Tensor] = partial(_chunk_loss, ce=ce)
    if flat_h.shape[0] <= chunk_tokens:
        return fn(flat_h, head, flat_y)  # one chunk: nothing to save by recomputing the head
    for start in range(0, flat_h.shape[0], chunk_tokens):
        hs, ys = flat_h[start:start + chunk_tokens], flat_y[start:start + chunk_tokens]
        if torch.is_grad_enabled():
            total = total + checkpoint(fn, hs, head, ys, use_reentrant=False)
        else:
            total = total + fn(hs, head, ys)
    return total
