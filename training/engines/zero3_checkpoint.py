"""DeepSpeed checkpoints written in the background.

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

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist
from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import (  # type: ignore[import-untyped]
    TorchCheckpointEngine,
)


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
