from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("DS_ACCELERATOR", "cpu")
from training.engines.zero3_checkpoint import BackgroundCheckpointEngine, host_copy


def test_the_file_holds_the_state_at_save_time_not_after_the_next_step(tmp_path: Path) -> None:
    writer = BackgroundCheckpointEngine(None, group=None)
    weights = torch.arange(6, dtype=torch.float32)
    writer.save({"optimizer": {"fp32_partition": weights, "step": 3}}, str(tmp_path / "zero.pt"))
    weights.add_(100.0)  # the next optimizer step, while the file may still be being written
    writer.commit(None)
    assert writer.done is not None
    writer.done.result(timeout=30)
    saved = torch.load(tmp_path / "zero.pt", weights_only=False)
    assert torch.equal(saved["optimizer"]["fp32_partition"], torch.arange(6, dtype=torch.float32))
    assert saved["optimizer"]["step"] == 3
    writer.close()


def test_a_failed_write_fails_the_checkpoint(tmp_path: Path) -> None:
    writer = BackgroundCheckpointEngine(None, group=None)
    writer.save({"w": torch.ones(2)}, str(tmp_path / "missing-dir" / "zero.pt"))
    writer.commit(None)
    assert writer.done is not None
    with pytest.raises(Exception, match=r"missing-dir|No such file|Parent directory"):
        writer.done.result(timeout=30)
    writer.close()


def test_host_copy_keeps_torch_size_and_copies_tensors() -> None:
    """zero_to_fp32 calls .numel() on the saved param_shapes: they must stay torch.Size."""
    t = torch.ones(2)
    state = {"param_shapes": [{"w": torch.Size([2, 3])}], "t": (t, 1)}
    out = host_copy(state)
    assert type(out["param_shapes"][0]["w"]) is torch.Size
    assert out["t"][0] is not t and torch.equal(out["t"][0], t) and out["t"][1] == 1
