"""PyTorch FSDP2 engine: `fully_shard` on every decoder layer and on the root, bf16 compute with
fp32 gradient reduction, explicit one-layer-ahead prefetch in both directions, the model built
on the meta device and initialised shard by shard (no rank ever holds the whole model), and
sharded checkpoints through torch.distributed.checkpoint with asynchronous writes.

Gradient memory comes from the compute stream's pool (`ComputeStreamReduceScatter`): FSDP2 allocates
each reduce-scatter output, which becomes the layer's sharded fp32 gradient for the rest of the step,
on its reduce-scatter stream, and the caching allocator never hands one stream's freed blocks to
another. The activations freed during backward (compute stream) then cannot hold the gradients
arriving at the same time (reduce-scatter stream), so each stream keeps its own high-water mark: on
one H200 the 8B with 20 of 32 layers kept reserved 138.5 GiB for a 123.6 GiB peak and retried
cudaMalloc twice a step (training/PERFORMANCE.md). `--grad-pool reduce-scatter` (TrainConfig.grad_pool) keeps FSDP2's
own allocation (for comparison).
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_saver import async_save
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultReduceScatter

from training.configs import ModelConfig, TrainConfig
from training.data import Batch
from training.engines import param_groups, run_micro_batches
from training.model import DecoderLayer, Llama
from training.safe_load import dcp_load


class ComputeStreamReduceScatter(DefaultReduceScatter):
    """FSDP2's reduce-scatter with its buffers allocated from `stream`'s pool (the compute stream),
    so gradients reuse the memory the activations free during backward. The block is marked as used
    by the stream it is allocated for (`record_stream`), so the allocator does not hand it out again
    before that stream's work on it is done (FSDP2 frees the output of an accumulating reduce-scatter
    while its addition may still be queued). The collective itself is FSDP2's."""

    def __init__(self, stream: torch.cuda.Stream) -> None:
        self.stream = stream

    def allocate(self, size: Any, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if device.type != "cuda":
            return torch.empty(*size, dtype=dtype, device=device)
        user = torch.cuda.current_stream(device)
        with torch.cuda.stream(self.stream):
            t = torch.empty(*size, dtype=dtype, device=device)
        if user != self.stream:
            t.record_stream(user)
        return t


def grads_from_compute_stream(modules: list[torch.nn.Module], device: torch.device, pool: str = "compute") -> bool:
    """Install `ComputeStreamReduceScatter` on every FSDP module (CUDA and `pool` "compute" only; see the
    module's doc)."""
    if device.type != "cuda" or pool != "compute":
        return False
    comm = ComputeStreamReduceScatter(torch.cuda.current_stream(device))
    for module in modules:
        assert isinstance(module, FSDPModule)
        module.set_custom_reduce_scatter(comm)
    return True


class FsdpEngine:
    name = "fsdp"

    def __init__(self, mcfg: ModelConfig, tcfg: TrainConfig, device: torch.device,
                 param_dtype: torch.dtype = torch.bfloat16, init_from: Path | None = None) -> None:
        self.device, self.tcfg = device, tcfg
        with torch.device("meta"):
            model = Llama(mcfg)
        model.loss_chunk_tokens = tcfg.loss_chunk_tokens
        model.document_attention = tcfg.document_mask_kernel
        model.set_activation_checkpointing(tcfg.activation_checkpoint, tcfg.ac_every, tcfg.ac_layers)
        layers = [m for m in model.model.layers if isinstance(m, DecoderLayer)]
        if tcfg.compile:
            for layer in layers:
                layer.compile()
            model.compile_loss()
        mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
        offload: OffloadPolicy = CPUOffloadPolicy(pin_memory=True) if tcfg.cpu_offload else OffloadPolicy()
        for layer in layers:
            fully_shard(layer, mp_policy=mp, reshard_after_forward=tcfg.reshard_after_forward,
                        offload_policy=offload)
        fully_shard(model, mp_policy=mp, reshard_after_forward=False, offload_policy=offload)
        if not tcfg.cpu_offload:
            grads_from_compute_stream([*layers, model], device, tcfg.grad_pool)
        # Explicit prefetch: the next layer's all-gather is issued before this layer computes.
        for i, layer in enumerate(layers):
            assert isinstance(layer, FSDPModule)
            if i + 1 < len(layers):
                layer.set_modules_to_forward_prefetch([layers[i + 1]])  # type: ignore[list-item]
            if i > 0:
                layer.set_modules_to_backward_prefetch([layers[i - 1]])  # type: ignore[list-item]
        model.to_empty(device="cpu" if tcfg.cpu_offload else device)
        if init_from is not None:
            from training.hf import load_sharded

            load_sharded(model, init_from)  # each rank reads its own shard's rows only
        else:
            with torch.no_grad():
                model.init_weights()
        self.model: torch.nn.Module = model
        cuda = device.type == "cuda" and not tcfg.cpu_offload
        self.optimizer = torch.optim.AdamW(param_groups(model, tcfg.weight_decay), lr=tcfg.lr,
                                           betas=tcfg.betas, eps=1e-8, fused=cuda, foreach=not cuda)
        # Checkpoint writes run in a background thread; their collectives get a group of their own
        # so they never interleave with the training collectives.
        self._ckpt_pg = dist.new_group(backend="gloo")
        self._pending: Future[Any] | None = None

    def train_step(self, batches: list[Batch], lr: float) -> tuple[float, float]:
        for g in self.optimizer.param_groups:
            g["lr"] = lr

        def step(b: Batch, doc: torch.Tensor | None, scale: torch.Tensor) -> torch.Tensor:
            loss_sum: torch.Tensor = self.model(b.input_ids, b.position_ids, b.labels, doc)
            (loss_sum * scale).backward()  # type: ignore[no-untyped-call]
            return loss_sum

        loss = run_micro_batches(batches, self.device, self.tcfg.document_mask, step)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tcfg.grad_clip)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, float(norm)

    def _state(self) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}

    def save(self, path: Path) -> None:
        self.wait_saved()
        ret: Any = async_save(self._state(), checkpoint_id=str(path), process_group=self._ckpt_pg)
        if hasattr(ret, "staging_completion"):  # newer DCP: staging itself may be asynchronous
            ret.staging_completion.result()
            ret = ret.upload_completion
        self._pending = ret

    def saved(self) -> bool:
        if self._pending is not None and not self._pending.done():
            return False
        self.wait_saved()  # raises when the save failed, so it is never marked complete
        return True

    def wait_saved(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def load(self, path: Path) -> None:
        state = self._state()
        dcp_load(state, path)  # restricted: the metadata's pickle and the non-tensor entries run no code
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
