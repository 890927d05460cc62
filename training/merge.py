"""`python -m training merge CKPT OUT.safetensors`: offline merge of a sharded checkpoint (every
rank's shard, FSDP2/DCP or DeepSpeed ZeRO-3) into one safetensors file with Hugging Face Llama
parameter names, without a GPU or a process group. Optimizer state is left out."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file


def _dcp_model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "full.pt"
        dcp_to_torch_save(str(ckpt), str(out))
        full = torch.load(out, map_location="cpu", weights_only=False)
    model = full["model"]
    return {k: v for k, v in model.items() if isinstance(v, torch.Tensor)}


def _zero_model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    import os

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint  # type: ignore[import-untyped]

    state: dict[str, torch.Tensor] = get_fp32_state_dict_from_zero_checkpoint(str(ckpt.parent), tag=ckpt.name)
    return state


def engine_of(ckpt: Path) -> str:
    extras = sorted(ckpt.glob("extra_rank*.json"))
    if extras:
        return str(json.loads(extras[0].read_text())["engine"])
    return "fsdp" if (ckpt / ".metadata").exists() else "deepspeed"


def merge(ckpt: Path, out: Path, dtype: torch.dtype = torch.float32) -> dict[str, tuple[int, ...]]:
    state = _dcp_model_state(ckpt) if engine_of(ckpt) == "fsdp" else _zero_model_state(ckpt)
    tensors = {k: v.to(dtype).contiguous() for k, v in state.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out), metadata={"format": "pt", "source": str(ckpt)})
    return {k: tuple(v.shape) for k, v in tensors.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training merge")
    p.add_argument("checkpoint", type=Path, help="a checkpoint directory, e.g. RUN/checkpoints/step_00001000")
    p.add_argument("out", type=Path)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    a = p.parse_args(argv)
    shapes = merge(a.checkpoint, a.out, getattr(torch, a.dtype))
    n = sum(int(torch.Size(s).numel()) for s in shapes.values())
    print(f"wrote {a.out}: {len(shapes)} tensors, {n:,} parameters ({a.dtype})")
    return 0
