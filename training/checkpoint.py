"""Checkpoint directory layout and bookkeeping shared by both engines.

    <run>/checkpoints/step_00000200/      engine shards (each rank writes its own; no gather)
                                  extra_rank{R}.json   step, loader state, RNG of rank R
                                  COMPLETE             written by rank 0 once every shard is on disk
    <run>/checkpoints/latest               name of the newest complete checkpoint

A checkpoint without COMPLETE is ignored by resume (a crash mid-write loses only that one).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from training.data import LoaderState
from training.elastic import streams_from_json


def step_dir(root: Path, step: int) -> Path:
    return root / f"step_{step:08d}"


def mark_complete(root: Path, path: Path, keep: int) -> None:
    (path / "COMPLETE").write_text("ok\n")
    tmp = root / "latest.tmp"
    tmp.write_text(path.name + "\n")
    os.replace(tmp, root / "latest")
    complete = sorted(p for p in root.glob("step_*") if (p / "COMPLETE").exists())
    for old in complete[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def is_complete(path: Path) -> bool:
    """COMPLETE written, or a DCP checkpoint whose metadata is there (DCP writes it last, after every
    rank's shard) with every rank's extra state: the job died before rank 0 could mark it."""
    if (path / "COMPLETE").exists():
        return True
    extras = list(path.glob("extra_rank*.json"))
    if not (path / ".metadata").exists() or not extras:
        return False
    try:
        world = ExtraState.from_json(extras[0].read_text()).world
    except (ValueError, KeyError):
        return False
    return len(extras) == world


def latest_complete(root: Path) -> Path | None:
    if not root.exists():
        return None
    pointer = root / "latest"
    candidates = sorted((p for p in root.glob("step_*") if p.is_dir()), reverse=True)
    for cand in candidates:
        if is_complete(cand):
            return cand
    if pointer.exists() and is_complete(root / pointer.read_text().strip()):
        return root / pointer.read_text().strip()
    return None


@dataclass(frozen=True)
class ExtraState:
    step: int
    loader: LoaderState
    torch_rng: str  # base64 of torch.get_rng_state()
    cuda_rng: str | None
    engine: str
    world: int

    def to_json(self) -> str:
        return json.dumps({"step": self.step, "loader": self.loader.to_json(), "torch_rng": self.torch_rng,
                           "cuda_rng": self.cuda_rng, "engine": self.engine, "world": self.world})

    @classmethod
    def from_json(cls, text: str) -> ExtraState:
        raw = json.loads(text)
        return cls(int(raw["step"]), streams_from_json(raw["loader"]), raw["torch_rng"], raw.get("cuda_rng"),
                   raw["engine"], int(raw["world"]))


def capture_rng() -> tuple[str, str | None]:
    cpu = base64.b64encode(bytes(torch.get_rng_state().tolist())).decode()
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        cuda = base64.b64encode(bytes(torch.cuda.get_rng_state().tolist())).decode()
    return cpu, cuda


def restore_rng(cpu: str, cuda: str | None) -> None:
    torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(cpu)), dtype=torch.uint8))
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(cuda)), dtype=torch.uint8))


def write_extra(path: Path, rank: int, extra: ExtraState) -> None:
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / f"extra_rank{rank}.json.tmp"
    tmp.write_text(extra.to_json())
    os.replace(tmp, path / f"extra_rank{rank}.json")


def read_extras(path: Path) -> list[ExtraState]:
    extras = [ExtraState.from_json(p.read_text()) for p in sorted(path.glob("extra_rank*.json"))]
    if not extras:
        raise FileNotFoundError(f"{path}: no extra_rank*.json")
    return sorted(extras, key=lambda e: e.loader.rank)
