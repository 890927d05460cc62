"""DeepSpeed checkpoints written in the background, and loaded on another world size through DeepSpeed's
universal checkpoints (`load_universal`).

DeepSpeed's own asynchronous writers (decoupled / FastPersist) need its compiled `async_io` op; this
engine needs nothing built. `save` copies the state's tensors to host memory (the only part training
waits for: the next optimizer step may then change the originals) and queues `torch.save` on one
writer thread. `commit`, which DeepSpeed calls once every file of a checkpoint is queued, queues a
completion step: wait for this rank's files, then agree with every other rank over a gloo group of
its own (never interleaved with the training collectives) that all files were written. `done`
resolves after that, so rank 0 can mark the checkpoint complete for everyone; a rank whose write
failed makes it fail on every rank.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import (  # type: ignore[import-untyped]
    TorchCheckpointEngine,
)

from training.safe_load import check_torch_files, deepspeed_globals, torch_load, weights_only_loads


def host_copy(item: Any) -> Any:
    """The state with every tensor copied to host memory. Unlike DeepSpeed's
    `clone_tensors_for_torch_save`, torch.Size stays torch.Size: that helper rebuilds every tuple as a
    plain tuple, and `zero_to_fp32` then fails on the saved `param_shapes` ('tuple' object has no
    attribute 'numel'), which is what broke the ZeRO-3 export of these checkpoints."""
    if torch.is_tensor(item):
        return item.detach().to("cpu", copy=True)
    if isinstance(item, torch.Size):
        return item
    if isinstance(item, list):
        return [host_copy(v) for v in item]
    if isinstance(item, tuple):
        return tuple(host_copy(v) for v in item)
    if isinstance(item, dict):
        return type(item)({k: host_copy(v) for k, v in item.items()})
    return item


class BackgroundCheckpointEngine(TorchCheckpointEngine):  # type: ignore[misc]
    def __init__(self, config_params: Any, group: Any | None) -> None:
        super().__init__(config_params)
        self.name = "BackgroundCheckpointEngine"
        self._group = group
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ds-checkpoint")
        self._writes: list[Future[None]] = []
        self.done: Future[None] | None = None

    def preserves_storage_sharing(self) -> bool:
        return False  # `save` makes its own host copy; DeepSpeed need not clone first

    def save(self, state_dict: Any, path: str) -> None:
        host = host_copy(state_dict)
        self._writes.append(self._writer.submit(torch.save, host, path,
                                                _use_new_zipfile_serialization=self.zipfile_serialization))

    def load(self, path: str, map_location: Any = None) -> Any:
        """DeepSpeed reads every model and optimizer state of `load_checkpoint` through this (its own
        engine uses `torch.load(weights_only=False)`): weights-only, DeepSpeed's two types allowed."""
        return torch_load(path, map_location, allowed=deepspeed_globals())

    def commit(self, info: Any) -> bool:
        writes, self._writes = self._writes, []
        self.done = self._writer.submit(self._all_written, writes)
        return True

    def _all_written(self, writes: list[Future[None]]) -> None:
        failures = []
        for w in writes:
            try:
                w.result()
            except Exception as exc:  # reported below, after every rank has been told
                failures.append(exc)
        failed = torch.tensor([len(failures)], dtype=torch.int64)
        if self._group is not None:
            dist.all_reduce(failed, group=self._group)
        if failures:
            raise failures[0]
        if int(failed.item()):
            raise RuntimeError(f"checkpoint incomplete: {int(failed.item())} file(s) failed on other ranks")

    def close(self) -> None:
        self._writer.shutdown(wait=True)


UNIVERSAL = "universal"  # the converted copy, inside the checkpoint it came from


def saved_ranks(path: Path) -> int:
    """Ranks that wrote this ZeRO-3 checkpoint (one optimizer partition file each)."""
    return len(list(path.glob("*zero_pp_rank_*_mp_rank_*_optim_states.pt")))


def universal_support() -> str | None:
    """None when the installed DeepSpeed converts ZeRO-3 checkpoints to universal ones and its ZeRO-3
    optimizer loads them (DeepSpeed PR 5475, April 2024), else why not."""
    try:
        from deepspeed.checkpoint import ds_to_universal  # type: ignore[import-untyped]
        from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3  # type: ignore[import-untyped]
    except ImportError as e:
        return f"DeepSpeed's universal checkpoints cannot be imported ({e})"
    if not (hasattr(ds_to_universal, "extract_zero_shards_stage3")
            and hasattr(DeepSpeedZeroOptimizer_Stage3, "load_hp_checkpoint_state_from_checkpoint_dir_stage3")):
        return f"DeepSpeed {importlib.metadata.version('deepspeed')} has no ZeRO-3 universal checkpoints"
    return None


def to_universal(path: Path, workers: int = 1) -> Path:
    """DeepSpeed's `ds_to_universal` of the checkpoint at `path` into `path/universal` (once: an existing
    conversion is reused; written beside it first, so a conversion cut short is never loaded)."""
    out = path / UNIVERSAL
    if (out / "zero" / "optimizer_state.pt").is_file():
        return out
    from deepspeed.checkpoint import ds_to_universal

    tmp = path / f"{UNIVERSAL}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    args = argparse.Namespace(input_folder=str(path), output_folder=str(tmp), num_extract_workers=workers,
                              num_merge_workers=workers, keep_temp_folder=False, strict=True,
                              inject_missing_state=False)
    with contextlib.redirect_stdout(io.StringIO()):  # a line per step and its arguments: not the job's log
        ds_to_universal.main(args)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    (path / "latest_universal").write_text(UNIVERSAL + "\n")
    return out


def load_universal(engine: Any, path: Path) -> None:
    """Load the ZeRO-3 checkpoint at `path` on this world size through a universal checkpoint (rank 0
    converts, every rank re-partitions the full fp32 weights and Adam moments for itself).
    DeepSpeed 0.19.8's universal ZeRO-3 load gives every parameter group the first group's
    hyperparameters (weight decay included); the configured ones are put back."""
    why = universal_support()
    if why is not None:
        raise RuntimeError(f"{path}: saved by {saved_ranks(path)} ranks, now {dist.get_world_size()}: {why}")
    allowed = deepspeed_globals()
    if dist.get_rank() == 0:
        # DeepSpeed's conversion and its universal load call torch.load(weights_only=False) themselves:
        # every file is checked first (the source and any conversion found there), every load forced weights-only.
        check_torch_files(path.rglob("*.pt"), allowed)
        with weights_only_loads(path, allowed):
            to_universal(path, workers=max(1, min(8, (os.cpu_count() or 2) // 2)))
    dist.barrier()
    base = engine.optimizer.optimizer
    configured = [{k: v for k, v in g.items() if k != "params"} for g in base.param_groups]
    engine._config.load_universal_checkpoint = True
    try:
        # Only for this load: with the flag set, a ZeRO-3 save writes rank 0's model states alone
        # (DeepSpeed issue 7546), so the checkpoints after this one would not convert.
        with weights_only_loads(path / UNIVERSAL, allowed):
            load_path, _ = engine.load_checkpoint(str(path), tag=UNIVERSAL, load_optimizer_states=True,
                                                  load_lr_scheduler_states=False)
    finally:
        engine._config.load_universal_checkpoint = False
    if load_path is None:
        raise RuntimeError(f"DeepSpeed found no universal checkpoint at {path / UNIVERSAL}")
    for group, hyper in zip(base.param_groups, configured, strict=True):
        group.update(hyper)
