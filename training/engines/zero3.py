"""DeepSpeed ZeRO-3 engine.

The model is constructed inside `deepspeed.zero.Init`, so each module's parameters are
partitioned as soon as that module is built and no rank ever holds the whole model (the
MultiMeditron failure: ZeRO-3 configured, yet every GPU loaded the full 70B). The optimizer is
PyTorch's AdamW (fused kernels on GPU), so nothing needs a CUDA compiler. Checkpoints are
DeepSpeed's own per-rank shards, without the 16-bit gather on save, written in the background
(`zero3_checkpoint.py`); `python -m training merge` turns them into safetensors offline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from training.configs import ModelConfig, TrainConfig
from training.data import Batch
from training.engines import param_groups, run_micro_batches
from training.model import Llama


def deepspeed_config(mcfg: ModelConfig, tcfg: TrainConfig, world: int, bf16: bool = True) -> dict[str, Any]:
    """ZeRO-3 settings derived from the model: with `zero3_buckets="hidden"` the rules Hugging Face's
    "auto" values use (reduce bucket h², prefetch bucket 0.9·h²), with "layer" one decoder layer's
    parameters for both; parameters under 10·h elements stay resident either way."""
    h = mcfg.hidden_size
    # reshard_after_forward=False is FSDP2's "keep the gathered layers for backward"; ZeRO-3's
    # equivalent is to let every parameter stay live and be reused (no second all-gather in backward).
    keep = mcfg.num_params() if not tcfg.reshard_after_forward else 1_000_000_000
    if tcfg.zero3_buckets == "layer":
        reduce_bucket, prefetch_bucket = mcfg.layer_params(), mcfg.layer_params()
    else:
        reduce_bucket, prefetch_bucket = h * h, int(0.9 * h * h)
    return {
        "train_micro_batch_size_per_gpu": tcfg.micro_batch,
        "gradient_accumulation_steps": tcfg.grad_accum,
        "train_batch_size": tcfg.micro_batch * tcfg.grad_accum * world,
        "gradient_clipping": tcfg.grad_clip,
        "bf16": {"enabled": bf16},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": True,
            "contiguous_gradients": True,
            "reduce_bucket_size": reduce_bucket,
            "stage3_prefetch_bucket_size": prefetch_bucket,
            "stage3_param_persistence_threshold": 10 * h,
            "stage3_max_live_parameters": keep,
            "stage3_max_reuse_distance": keep,
            "sub_group_size": 1_000_000_000,
            "stage3_gather_16bit_weights_on_model_save": False,
        },
        **({"optimizer": {"type": "AdamW", "params": {"lr": tcfg.lr, "betas": list(tcfg.betas), "eps": 1e-8,
                                                       "weight_decay": tcfg.weight_decay}}}
           if tcfg.deepspeed_optimizer == "fused" else {"zero_allow_untested_optimizer": True}),
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


class DeepSpeedEngine:
    name = "deepspeed"

    def __init__(self, mcfg: ModelConfig, tcfg: TrainConfig, device: torch.device,
                 param_dtype: torch.dtype = torch.bfloat16, init_from: Path | None = None) -> None:
        if device.type != "cuda":
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed  # type: ignore[import-untyped]
        import deepspeed.comm.torch  # type: ignore[import-untyped]

        if device.type != "cuda":
            # DeepSpeed's CPU backend would JIT-compile a shared-memory all-reduce with the C++
            # compiler (minutes); gloo does the job without building anything. The module is taken
            # from sys.modules: the attribute `deepspeed.comm.torch` is PyTorch itself.
            sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]

        self.device, self.tcfg = device, tcfg
        world = dist.get_world_size()
        self.config = deepspeed_config(mcfg, tcfg, world, bf16=param_dtype == torch.bfloat16)
        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
        # No dtype argument: the config's bf16 flag decides (with one, DeepSpeed 0.19.8 picks bf16 on a
        # CPU accelerator whatever was asked, an operator-precedence slip in Init._set_dtype).
        with deepspeed.zero.Init(config_dict_or_path=self.config):
            model = Llama(mcfg)
        if init_from is not None:
            from training.hf import load_zero3

            load_zero3(model, init_from)  # module by module, before the optimizer copies the weights
        model.loss_chunk_tokens = tcfg.loss_chunk_tokens
        model.document_attention = tcfg.document_mask_kernel
        model.set_activation_checkpointing(tcfg.activation_checkpoint, tcfg.ac_every, tcfg.ac_layers)
        if tcfg.compile:
            # DeepSpeed's gather hooks sit on every submodule, so the layers cannot be compiled whole
            # as under FSDP2; the parameter-free element-wise work (RMSNorm, RoPE, SwiGLU) can.
            model.compile_pointwise()
        cuda = device.type == "cuda"
        groups = param_groups(model, tcfg.weight_decay)
        if tcfg.deepspeed_optimizer == "fused":
            engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=self.config)
        else:
            optimizer = torch.optim.AdamW(groups, lr=tcfg.lr, betas=tcfg.betas, eps=1e-8, fused=cuda,
                                          foreach=not cuda)
            engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=self.config)
        self.engine: Any = engine
        self.model: torch.nn.Module = engine.module
        from training.engines.zero3_checkpoint import BackgroundCheckpointEngine

        # Every rank creates the group, in the same order: it carries only the checkpoint agreement.
        self.writer = BackgroundCheckpointEngine(engine._config, dist.new_group(backend="gloo"))
        engine.checkpoint_engine = self.writer

    def train_step(self, batches: list[Batch], lr: float) -> tuple[float, float]:
        for g in self.engine.optimizer.param_groups:
            g["lr"] = lr

        def step(b: Batch, doc: torch.Tensor | None, scale: torch.Tensor) -> torch.Tensor:
            loss_sum: torch.Tensor = self.engine(b.input_ids, b.position_ids, b.labels, doc)
            # the scale already spans the micro-batches: DeepSpeed must not divide by them again
            self.engine.backward(loss_sum * scale, scale_wrt_gas=False)
            self.engine.step()  # applies the update only at the accumulation boundary
            return loss_sum

        loss = run_micro_batches(batches, self.device, self.tcfg.document_mask, step)
        norm = self.engine.get_global_grad_norm()
        return loss, float(norm if norm is not None else float("nan"))

    def save(self, path: Path) -> None:
        self.wait_saved()
        # Returns once the tensors are copied to host memory; the files are written in the background.
        self.engine.save_checkpoint(str(path.parent), tag=path.name, save_latest=False)

    def saved(self) -> bool:
        if self.writer.done is not None and not self.writer.done.done():
            return False
        self.wait_saved()  # raises when the checkpoint failed, so it is never marked complete
        return True

    def wait_saved(self) -> None:
        if self.writer.done is not None:
            done, self.writer.done = self.writer.done, None
            done.result()

    def load(self, path: Path) -> None:
        self.wait_saved()
        from training.engines.zero3_checkpoint import load_universal, saved_ranks
        from training.safe_load import deepspeed_globals, weights_only_loads

        if saved_ranks(path) not in (0, dist.get_world_size()):
            load_universal(self.engine, path)
            return
        # Every file is read by the writer's `load` (restricted, `zero3_checkpoint.py`); the forced
        # weights-only loads guard any read DeepSpeed makes around it.
        with weights_only_loads(path, deepspeed_globals()):
            load_path, _ = self.engine.load_checkpoint(str(path.parent), tag=path.name, load_optimizer_states=True,
                                                       load_lr_scheduler_states=False)
        if load_path is None:
            raise RuntimeError(f"DeepSpeed found no checkpoint at {path}")
