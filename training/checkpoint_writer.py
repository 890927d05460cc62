"""The job's checkpoint writer: one save in flight at a time, each marked complete once it is on disk.

An engine's save may return before its bytes are written (FSDP2's asynchronous DCP save; training/engines/).
The writer keeps the checkpoints it started and has not yet marked, and marks them (COMPLETE, `latest`,
old ones pruned: training/checkpoint.py) as soon as the engine reports them saved: at the next step's
`poll`, before the next save, or at `flush`. Rank 0's save completes only after every rank's shard is
written (DCP's final gather; DeepSpeed's save ends in a barrier), so rank 0 alone marks.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from training.checkpoint import ExtraState, capture_rng, mark_complete, step_dir, write_extra
from training.configs import ModelConfig
from training.data import LoaderState
from training.engines import Engine
from training.monitor import MetricsWriter


class CheckpointWriter:
    def __init__(self, root: Path, engine: Engine, rank: int, world: int, keep: int, metrics: MetricsWriter,
                 model: ModelConfig, tokenizer: Path | None) -> None:
        self.root, self.engine, self.rank, self.world, self.keep = root, engine, rank, world, keep
        self.metrics, self.model, self.tokenizer = metrics, model, tokenizer
        self._pending: list[Path] = []  # started, not yet marked complete

    @property
    def in_flight(self) -> bool:
        """A save was started and is not yet marked (the step that follows overlaps its write)."""
        return bool(self._pending)

    def poll(self) -> None:
        """Mark what the engine has finished writing, without waiting."""
        if self._pending and self.engine.saved():
            self._mark_pending()

    def flush(self) -> None:
        """Wait for the save in flight and mark it."""
        self.engine.wait_saved()
        self._mark_pending()

    def save(self, step: int, loader: LoaderState | None) -> Path:
        """Start saving `step`: the Hugging Face files beside it (rank 0, before the save, which may mark it
        complete), this rank's extra state, then the engine's shards."""
        path = step_dir(self.root, step)
        if self.rank == 0:
            write_hf_files(path, self.model, self.tokenizer)
        t = time.perf_counter()
        self.flush()  # at most one save in flight
        cpu, cu = capture_rng()
        state = loader or LoaderState(0, 0, self.rank, self.world)
        write_extra(path, self.rank, ExtraState(step, state, cpu, cu, self.engine.name, self.world))
        self.engine.save(path)
        self._pending.append(path)
        self.poll()  # already on disk (a small checkpoint can be): marked now
        self.metrics.event("checkpoint", step=step, path=str(path), blocking_seconds=time.perf_counter() - t)
        return path

    def _mark_pending(self) -> None:
        while self._pending:
            path = self._pending.pop(0)
            if self.rank == 0:
                mark_complete(self.root, path, self.keep)


def write_hf_files(path: Path, mcfg: ModelConfig, tokenizer: Path | None) -> None:
    """config.json (and the tokenizer's files) beside a checkpoint, so `merge CKPT DIR` writes a
    folder transformers loads."""
    from training.hf import hf_config
    from training.merge import TOKENIZER_FILES

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(hf_config(mcfg), indent=2) + "\n")
    if tokenizer is not None:
        shutil.copyfile(tokenizer, path / "tokenizer.json")
        for name in TOKENIZER_FILES[1:]:  # the configs saying which tokens are BOS/EOS, when beside it
            if (tokenizer.parent / name).exists():
                shutil.copyfile(tokenizer.parent / name, path / name)
