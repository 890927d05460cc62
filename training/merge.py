"""`python -m training merge CKPT OUT.safetensors`: offline merge of a sharded checkpoint (every
rank's shard, FSDP2/DCP or DeepSpeed ZeRO-3) into one safetensors file with Hugging Face Llama
parameter names, without a GPU or a process group. Optimizer state is left out."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from pathlib import Path

import torch
from safetensors.torch import save_file

from training.safe_load import (
    CheckpointRefused,
    SafeFileSystemReader,
    check_torch_files,
    dcp_load,
    deepspeed_globals,
    weights_only_loads,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _dcp_model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    """Only the model's tensors: the entries under `model` are found in the checkpoint's metadata
    and read into tensors of their saved shapes, so the optimizer state (two fp32 moments per
    parameter: two thirds of a ~850 GB checkpoint at 70B) is neither read nor written anywhere."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    prefix = "model."  # DCP flattens {"model": {name: tensor}} to "model.<name>"
    metadata = SafeFileSystemReader(str(ckpt)).read_metadata()
    model: dict[str, torch.Tensor] = {
        key[len(prefix):]: torch.empty(meta.size, dtype=meta.properties.dtype)
        for key, meta in metadata.state_dict_metadata.items()
        if key.startswith(prefix) and isinstance(meta, TensorStorageMetadata)
    }
    if not model:
        raise ValueError(f"{ckpt}: no model tensors in the checkpoint's metadata")
    # no_dist: a single process reads every rank's shards, no process group needed.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process")
        dcp_load({"model": model}, ckpt, no_dist=True)
    return model


def _zero_model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    """DeepSpeed's `zero_to_fp32`, which reads with `torch.load(weights_only=False)`: every file of the
    checkpoint is checked first (a refusal names it), and its loads are forced weights-only."""
    import os

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint  # type: ignore[import-untyped]

    allowed = deepspeed_globals()
    check_torch_files(ckpt.rglob("*.pt"), allowed)
    with weights_only_loads(ckpt, allowed):
        state: dict[str, torch.Tensor] = get_fp32_state_dict_from_zero_checkpoint(str(ckpt.parent), tag=ckpt.name)
    return state


def engine_of(ckpt: Path) -> str:
    extras = sorted(ckpt.glob("extra_rank*.json"))
    if extras:
        return str(json.loads(extras[0].read_text())["engine"])
    return "fsdp" if (ckpt / ".metadata").exists() else "deepspeed"


def merge(ckpt: Path, out: Path, dtype: torch.dtype = torch.float32) -> dict[str, tuple[int, ...]]:
    """OUT ending in .safetensors: that one file. Otherwise OUT is a Hugging Face model folder
    (model.safetensors, config.json from the checkpoint, the tokenizer files saved with it) that
    `transformers.AutoModelForCausalLM.from_pretrained(OUT)` loads."""
    state = _dcp_model_state(ckpt) if engine_of(ckpt) == "fsdp" else _zero_model_state(ckpt)
    folder = out.suffix != ".safetensors"
    if folder and not (ckpt / "config.json").exists():
        raise FileNotFoundError(f"{ckpt}/config.json: this checkpoint predates the HF export; "
                                f"merge to a .safetensors file instead")
    # Convert tensor by tensor, dropping each original, so the full model is never held twice.
    tensors = {k: state.pop(k).to(dtype).contiguous() for k in sorted(state)}
    target = out / "model.safetensors" if folder else out
    target.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(target), metadata={"format": "pt", "source": str(ckpt)})
    if folder:
        config = json.loads((ckpt / "config.json").read_text())
        config["torch_dtype"] = str(dtype).removeprefix("torch.")
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for name in TOKENIZER_FILES:
            if (ckpt / name).exists():
                shutil.copyfile(ckpt / name, out / name)
    return {k: tuple(v.shape) for k, v in tensors.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training merge")
    p.add_argument("checkpoint", type=Path, help="a checkpoint directory, e.g. RUN/checkpoints/step_00001000")
    p.add_argument("out", type=Path, help="OUT.safetensors, or a folder for a Hugging Face model (config.json too)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    a = p.parse_args(argv)
    try:
        shapes = merge(a.checkpoint, a.out, getattr(torch, a.dtype))
    except CheckpointRefused as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    n = sum(int(torch.Size(s).numel()) for s in shapes.values())
    print(f"wrote {a.out}: {len(shapes)} tensors, {n:,} parameters ({a.dtype})")
    return 0
