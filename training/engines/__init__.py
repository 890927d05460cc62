"""Training engines: PyTorch FSDP2 (`fully_shard`) and DeepSpeed ZeRO-3. Both expose the same
small surface (`Engine`), so the training loop, checkpoints and monitor are shared."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist

from training.configs import TrainConfig
from training.data import Batch


class Engine(Protocol):
    name: str
    model: torch.nn.Module

    def train_step(self, batches: list[Batch], lr: float) -> tuple[float, float]:
        """One optimizer step over `batches` (the micro-batches); returns (mean token loss, grad norm)."""
        ...

    def save(self, path: Path) -> None:
        """Write this rank's shard of model and optimizer state under `path` (may return before
        the bytes are on disk; `wait_saved` blocks until they are)."""
        ...

    def saved(self) -> bool:
        """True once every save started so far is complete on this rank."""
        ...

    def wait_saved(self) -> None: ...

    def load(self, path: Path) -> None: ...


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up then cosine decay to `min_lr_ratio` of the peak; `step` counts from 1."""
    if step <= cfg.warmup_steps:
        return cfg.lr * step / max(1, cfg.warmup_steps)
    span = max(1, cfg.steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    ratio = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.lr * ratio


def global_token_count(batches: list[Batch], device: torch.device) -> torch.Tensor:
    """Tokens with a label, summed over micro-batches and ranks: the loss denominator, so padding
    never dilutes the loss and every rank's gradient has the same weight per token."""
    n = torch.tensor(float(sum(int((b.labels != -100).sum()) for b in batches)), device=device)
    if dist.is_initialized():
        dist.all_reduce(n)
    return n.clamp_min(1.0)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """Weight decay on matrices only (not on norm gains)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


MicroStep = Callable[[Batch, "torch.Tensor | None", "torch.Tensor"], torch.Tensor]


def run_micro_batches(batches: list[Batch], device: torch.device, document_mask: bool, step: MicroStep) -> float:
    """Forward and backward over each micro-batch. `step(batch, doc_ids, scale)` returns the summed
    token loss and back-propagates loss x scale, where scale = world / (labelled tokens over every
    micro-batch and rank): the engines average gradients over ranks, so the update is the mean over
    all tokens of the step. Returns that mean loss, the same on every rank."""
    world = dist.get_world_size()
    scale = world / global_token_count(batches, device)
    total = torch.zeros((), device=device)
    for b in batches:
        b = b.to(device)
        total += step(b, b.doc_ids if document_mask else None, scale).detach()
    dist.all_reduce(total)
    return float(total * scale / world)
