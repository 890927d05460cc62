"""The offline merge of an FSDP2/DCP checkpoint reads the model's tensors and nothing else."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner
from torch.distributed.checkpoint.state_dict_saver import save

from training.configs import tiny
from training.merge import merge
from training.model import Llama


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    """A DCP checkpoint in the layout FsdpEngine.save writes ({"model": …, "optim": …}), with
    AdamW state after one step, saved by one process."""
    torch.manual_seed(0)
    model = Llama(tiny())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, tiny().vocab_size, (1, 16))
    model(ids, torch.arange(16).unsqueeze(0), ids, None).backward()
    opt.step()
    names = {id(p): n for n, p in model.named_parameters()}
    optim = {"state": {names[id(p)]: s for p, s in opt.state.items()}, "param_groups": []}
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = tmp_path_factory.mktemp("dcp") / "step_00000001"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: assuming a single process"
        save({"model": model.state_dict(), "optim": optim}, checkpoint_id=str(out), no_dist=True)
    return out, weights


def test_merge_reads_only_the_model_tensors_and_writes_them_exactly(
        checkpoint: tuple[Path, dict[str, torch.Tensor]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt, weights = checkpoint
    read: list[str] = []
    original = FileSystemReader.read_data

    def recording(self: FileSystemReader, plan: LoadPlan, planner: LoadPlanner) -> Any:
        read.extend(item.storage_index.fqn for item in plan.items)
        return original(self, plan, planner)

    monkeypatch.setattr(FileSystemReader, "read_data", recording)
    out = tmp_path / "model.safetensors"
    merge(ckpt, out)
    tensors = load_file(str(out))
    assert set(tensors) == set(weights)
    for name, value in weights.items():
        assert torch.equal(tensors[name], value.float()), name
    assert read and all(fqn.startswith("model.") for fqn in read)  # no optimizer entry was read
    assert len(set(read)) == len(weights)
