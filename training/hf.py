"""Hugging Face Llama checkpoints in and out.

In: `config.json` -> `ModelConfig` (Llama 3, and 3.1/3.3 with the `llama3` RoPE scaling), and the
weights of sharded safetensors (`model.safetensors.index.json`) or one `model.safetensors` read
straight into the sharded model. FSDP2: each rank reads only the rows of its own shard of every
tensor (safetensors slices, memory-mapped), so no rank ever holds a whole tensor it does not own,
let alone the model. ZeRO-3: module by module under `deepspeed.zero.GatheredParameters`; rank 0
reads one module's tensors (at most one projection matrix or embedding), which are scattered back
into the partitions when the block ends.

Out: `hf_config()` is the `config.json` a merged checkpoint is written with, so
`transformers.AutoModelForCausalLM.from_pretrained` loads the merge tool's output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors import safe_open

from training.configs import ModelConfig

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


def _rope(raw: dict[str, Any]) -> tuple[float, tuple[float, float, float, int] | None]:
    """(theta, llama3 scaling) from either the transformers 4 (`rope_theta`, `rope_scaling`) or the
    transformers 5 (`rope_parameters`) layout."""
    params = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    theta = float(raw.get("rope_theta", params.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind != "llama3":
        raise ValueError(f"RoPE type {kind!r} is not supported (default and llama3 are)")
    return theta, (float(params["factor"]), float(params["low_freq_factor"]), float(params["high_freq_factor"]),
                   int(params["original_max_position_embeddings"]))


def model_config_from_hf(hf_dir: Path) -> ModelConfig:
    raw: dict[str, Any] = json.loads((hf_dir / "config.json").read_text())
    if raw.get("model_type") != "llama":
        raise ValueError(f"{hf_dir}: model_type {raw.get('model_type')!r}, expected llama")
    for flag in ("attention_bias", "mlp_bias"):
        if raw.get(flag):
            raise ValueError(f"{hf_dir}: {flag} is set; this Llama has no biases")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{hf_dir}: hidden_act {raw['hidden_act']!r}, expected silu")
    h, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
    if int(raw.get("head_dim") or h // heads) != h // heads:
        raise ValueError(f"{hf_dir}: head_dim {raw['head_dim']} != hidden_size / heads")
    theta, scaling = _rope(raw)
    return ModelConfig(
        name=f"hf:{hf_dir.name}", vocab_size=int(raw["vocab_size"]), hidden_size=h,
        intermediate_size=int(raw["intermediate_size"]), num_layers=int(raw["num_hidden_layers"]),
        num_heads=heads, num_kv_heads=int(raw.get("num_key_value_heads") or heads), rope_theta=theta,
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-5)), max_seq_len=int(raw.get("max_position_embeddings", 8192)),
        tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
        init_std=float(raw.get("initializer_range", 0.02)), rope_scaling=scaling)


def hf_config(cfg: ModelConfig, bos: int | None = None, eos: int | None = None,
              dtype: str = "bfloat16") -> dict[str, Any]:
    """The `config.json` of `LlamaForCausalLM` for this shape (RoPE in the transformers 4 layout,
    which transformers 5 reads too)."""
    out: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim, "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len, "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta, "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": False, "mlp_bias": False, "initializer_range": cfg.init_std, "torch_dtype": dtype,
        "bos_token_id": bos, "eos_token_id": eos,
    }
    if cfg.rope_scaling is not None:
        factor, low, high, original = cfg.rope_scaling
        out["rope_scaling"] = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low,
                               "high_freq_factor": high, "original_max_position_embeddings": original}
    return out


class SafetensorsFolder:
    """Tensor name -> file of a Hugging Face folder; tensors and row slices read memory-mapped."""

    def __init__(self, hf_dir: Path) -> None:
        if (hf_dir / INDEX).exists():
            weight_map: dict[str, str] = json.loads((hf_dir / INDEX).read_text())["weight_map"]
        elif (hf_dir / SINGLE).exists():
            with safe_open(str(hf_dir / SINGLE), framework="pt") as f:
                weight_map = {k: SINGLE for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        else:
            raise FileNotFoundError(f"{hf_dir}: neither {INDEX} nor {SINGLE}")
        self.dir, self.weight_map = hf_dir, weight_map
        self._stack = ExitStack()
        self._files: dict[str, Any] = {}

    def _file(self, name: str) -> Any:
        if name not in self.weight_map:
            raise KeyError(f"{self.dir}: no tensor {name!r}")
        fname = self.weight_map[name]
        if fname not in self._files:
            self._files[fname] = self._stack.enter_context(safe_open(str(self.dir / fname), framework="pt"))
        return self._files[fname]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._file(name).get_slice(name).get_shape())

    def read(self, name: str, offset: tuple[int, ...] | None = None, size: tuple[int, ...] | None = None
             ) -> torch.Tensor:
        """The whole tensor, or the box [offset, offset + size) of it (only those bytes are read)."""
        sl = self._file(name).get_slice(name)
        if offset is None or size is None:
            t: torch.Tensor = sl[:]
            return t
        box = tuple(slice(o, o + n) for o, n in zip(offset, size, strict=True))
        t = sl[box]
        return t

    def close(self) -> None:
        self._stack.close()


def _check_names(model: torch.nn.Module, folder: SafetensorsFolder) -> list[tuple[str, torch.nn.Parameter]]:
    params = list(model.named_parameters())  # tied weights appear once
    names = {n for n, _ in params}
    tied = getattr(getattr(model, "cfg", None), "tie_embeddings", False)
    extra = set(folder.weight_map) - names - ({"lm_head.weight"} if tied else set())
    missing = names - set(folder.weight_map)
    if missing or extra:
        raise ValueError(f"{folder.dir}: missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}")
    return params


def _local_box(p: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...], tuple[int, ...]]:
    """(this rank's tensor, its offset in the global tensor, its shape) for a DTensor or a plain one."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    if isinstance(p, DTensor):
        shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
        return p.to_local(), tuple(offset), tuple(shape)
    return p, (0,) * p.ndim, tuple(p.shape)


@torch.no_grad()
def load_sharded(model: torch.nn.Module, hf_dir: Path) -> int:
    """FSDP2 (or unsharded) model: every rank copies the rows of its own shards. Returns the number
    of elements this rank read."""
    folder = SafetensorsFolder(hf_dir)
    read = 0
    try:
        for name, p in _check_names(model, folder):
            if folder.shape(name) != tuple(p.shape):
                raise ValueError(f"{name}: checkpoint shape {folder.shape(name)}, model {tuple(p.shape)}")
            local, offset, size = _local_box(p)
            if local.numel() == 0:
                continue
            piece = folder.read(name, offset, size)
            local.copy_(piece)
            read += piece.numel()
    finally:
        folder.close()
    return read


def _modules_with_params(model: torch.nn.Module) -> Iterator[tuple[str, list[tuple[str, torch.nn.Parameter]]]]:
    seen: set[int] = set()
    for mod_name, module in model.named_modules():
        own = [(n, p) for n, p in module.named_parameters(recurse=False) if id(p) not in seen]
        seen.update(id(p) for _, p in own)
        if own:
            yield mod_name, own


@torch.no_grad()
def load_zero3(model: torch.nn.Module, hf_dir: Path) -> int:
    """ZeRO-3 model built under `deepspeed.zero.Init`: one module at a time is gathered, rank 0
    copies that module's tensors in, and leaving the block re-partitions them (rank 0's values).
    Call before `deepspeed.initialize`, which takes the fp32 master copies from these values."""
    import deepspeed  # type: ignore[import-untyped]

    folder = SafetensorsFolder(hf_dir)
    rank0 = dist.get_rank() == 0
    read = 0
    try:
        _check_names(model, folder)
        for mod_name, own in _modules_with_params(model):
            with deepspeed.zero.GatheredParameters([p for _, p in own], modifier_rank=0):
                if not rank0:
                    continue
                for local_name, p in own:
                    name = f"{mod_name}.{local_name}" if mod_name else local_name
                    t = folder.read(name)
                    if tuple(t.shape) != tuple(p.shape):
                        raise ValueError(f"{name}: checkpoint shape {tuple(t.shape)}, model {tuple(p.shape)}")
                    p.data.copy_(t)
                    read += t.numel()
    finally:
        folder.close()
    return read
