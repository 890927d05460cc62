"""Issue 38: a checkpoint never runs code. Each format the job reads (DCP's `.metadata` pickle, DCP's
non-tensor entries, DeepSpeed's torch.save states, a universal conversion found in the checkpoint, a bare
pickle named .pt) is given a payload that would create a marker file when unpickled; the read is refused
with one line naming the file, and the marker is never created."""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.distributed.checkpoint.state_dict_saver import save

from tests.training.conftest import one_rank_group

os.environ.setdefault("DS_ACCELERATOR", "cpu")
from training.engines.zero3_checkpoint import BackgroundCheckpointEngine, load_universal
from training.merge import main as merge_main
from training.merge import merge
from training.safe_load import (
    FORCE_ENV,
    CheckpointRefused,
    SafeFileSystemReader,
    check_torch_files,
    dcp_load,
    deepspeed_globals,
    torch_load,
    weights_only_loads,
)


class Payload:
    """Unpickling this calls os.system: what a hostile checkpoint would hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_the_payload_runs_when_read_unrestricted(tmp_path: Path) -> None:
    """The control: the payload is live, so a missing marker below means nothing ran."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(Payload(marker)))  # the point of this test
    assert marker.exists()


def _refused_naming(exc: pytest.ExceptionInfo[CheckpointRefused], path: Path) -> None:
    message = str(exc.value)
    assert str(path) in message and "\n" not in message, message
    assert "system" in message, message  # the callable it names


def _dcp(out: Path, extra: dict[str, Any] | None = None) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: assuming a single process"
        save({"model": {"w": torch.arange(6, dtype=torch.bfloat16)}, **(extra or {})}, checkpoint_id=str(out),
             no_dist=True)
    return out


def test_a_dcp_metadata_pickle_that_would_run_code_is_refused_by_merge(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ckpt = _dcp(tmp_path / "step_00000001")
    (ckpt / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointRefused) as exc:
        merge(ckpt, tmp_path / "out.safetensors")
    _refused_naming(exc, ckpt / ".metadata")
    assert not marker.exists()


def test_the_merge_command_prints_the_refusal_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    ckpt = _dcp(tmp_path / "step_00000001")
    (ckpt / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    assert merge_main([str(ckpt), str(tmp_path / "out.safetensors")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and str(ckpt / ".metadata") in err
    assert not marker.exists()


def test_a_dcp_entry_that_would_run_code_is_refused_on_resume(tmp_path: Path) -> None:
    """FsdpEngine.load reads through `dcp_load`: the optimizer's non-tensor entries are torch.save bytes."""
    marker = tmp_path / "ran"
    ckpt = _dcp(tmp_path / "step_00000001", {"optim": {"hyper": Payload(marker)}})
    assert not marker.exists()  # saving it ran nothing
    state: dict[str, Any] = {"model": {"w": torch.empty(6, dtype=torch.bfloat16)}, "optim": {"hyper": None}}
    with pytest.raises(CheckpointRefused) as exc:
        dcp_load(state, ckpt, no_dist=True)
    _refused_naming(exc, ckpt)
    assert "optim.hyper" in str(exc.value) and not marker.exists()


def test_a_real_dcp_checkpoint_with_bf16_tensors_and_plain_entries_still_loads(tmp_path: Path) -> None:
    ckpt = _dcp(tmp_path / "step_00000001", {"optim": {"lr": 3e-4, "betas": (0.9, 0.95)}})
    assert "model.w" in SafeFileSystemReader(str(ckpt)).read_metadata().state_dict_metadata
    state: dict[str, Any] = {"model": {"w": torch.empty(6, dtype=torch.bfloat16)}, "optim": {"lr": 0.0, "betas": None}}
    dcp_load(state, ckpt, no_dist=True)
    assert torch.equal(state["model"]["w"], torch.arange(6, dtype=torch.bfloat16))
    assert state["optim"] == {"lr": 3e-4, "betas": (0.9, 0.95)}


ZERO_FILES = ("zero_pp_rank_0_mp_rank_00_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
              "universal/zero/lm_head.weight/fp32.pt")


@pytest.mark.parametrize("hostile", ZERO_FILES)
def test_a_zero_state_that_would_run_code_is_refused_by_merge_naming_the_file(tmp_path: Path, hostile: str) -> None:
    marker = tmp_path / "ran"
    ckpt = tmp_path / "step_00000001"
    for name in ZERO_FILES:
        (ckpt / name).parent.mkdir(parents=True, exist_ok=True)
        torch.save(Payload(marker) if name == hostile else {"w": torch.ones(2)}, ckpt / name)
    with pytest.raises(CheckpointRefused) as exc:
        merge(ckpt, tmp_path / "out.safetensors")
    _refused_naming(exc, ckpt / hostile)
    assert not marker.exists()


def test_a_bare_pickle_named_pt_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ckpt = tmp_path / "step_00000001"
    ckpt.mkdir()
    (ckpt / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointRefused, match=r"not a torch\.save zip archive") as exc:
        merge(ckpt, tmp_path / "out.safetensors")
    assert str(ckpt / "zero_pp_rank_0_mp_rank_00_model_states.pt") in str(exc.value)
    assert not marker.exists()


def test_deepspeeds_own_unrestricted_loads_are_refused_while_forced(tmp_path: Path) -> None:
    """What zero_to_fp32, ds_to_universal and the universal load do: torch.load(weights_only=False)."""
    marker = tmp_path / "ran"
    torch.save(Payload(marker), tmp_path / "state.pt")
    before = os.environ.get(FORCE_ENV)
    with pytest.raises(CheckpointRefused) as exc, weights_only_loads(tmp_path, deepspeed_globals()):
        torch.load(tmp_path / "state.pt", weights_only=False)
    _refused_naming(exc, tmp_path)
    assert not marker.exists() and os.environ.get(FORCE_ENV) == before


def test_the_zero_writer_loads_its_states_restricted_on_resume(tmp_path: Path) -> None:
    """engine.load_checkpoint reads every model and optimizer state through the writer's `load`."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler  # type: ignore[import-untyped]
    from deepspeed.runtime.zero.config import ZeroStageEnum  # type: ignore[import-untyped]

    marker = tmp_path / "ran"
    writer = BackgroundCheckpointEngine(None, group=None)
    try:
        torch.save(Payload(marker), tmp_path / "hostile.pt")
        with pytest.raises(CheckpointRefused) as exc:
            writer.load(str(tmp_path / "hostile.pt"), map_location="cpu")
        _refused_naming(exc, tmp_path / "hostile.pt")
        assert not marker.exists()
        # what DeepSpeed's ZeRO-3 optimizer states hold loads: its two types and tensors
        state = {"zero_stage": ZeroStageEnum.weights, "loss_scaler": LossScaler(1.0), "fp32": [torch.ones(3)]}
        torch.save(state, tmp_path / "optim_states.pt")
        loaded = writer.load(str(tmp_path / "optim_states.pt"))
        assert loaded["zero_stage"] is ZeroStageEnum.weights and loaded["loss_scaler"].loss_scale == 1.0
    finally:
        writer.close()


def test_a_hostile_universal_conversion_in_the_checkpoint_is_refused_before_resuming(tmp_path: Path) -> None:
    """A checkpoint saved by another world size resumes through `universal/`, reused when present."""
    marker = tmp_path / "ran"
    ckpt = tmp_path / "step_00000002"
    (ckpt / "universal" / "zero").mkdir(parents=True)
    torch.save({"w": torch.ones(2)}, ckpt / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt")
    torch.save(Payload(marker), ckpt / "universal" / "zero" / "optimizer_state.pt")
    with one_rank_group(), pytest.raises(CheckpointRefused) as exc:
        load_universal(object(), ckpt)
    _refused_naming(exc, ckpt / "universal" / "zero" / "optimizer_state.pt")
    assert not marker.exists()


def test_torch_load_and_the_file_check_accept_plain_states(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2), "shape": torch.Size([2]), "step": 3}, tmp_path / "a.pt")
    assert check_torch_files([tmp_path / "a.pt"]) == 1
    assert torch_load(tmp_path / "a.pt")["shape"] == torch.Size([2])


def test_a_nested_restricted_load_leaves_the_enclosing_allow_list_in_place(tmp_path: Path) -> None:
    """The universal load: DeepSpeed reads model states through the writer's `load` (its own allow-list),
    then the optimizer state with torch.load, inside one forced region."""
    from deepspeed.runtime.zero.config import ZeroStageEnum

    torch.save({"zero_stage": ZeroStageEnum.weights}, tmp_path / "optimizer_state.pt")
    with weights_only_loads(tmp_path, deepspeed_globals()):
        torch_load(tmp_path / "optimizer_state.pt", allowed=deepspeed_globals())
        assert torch.load(tmp_path / "optimizer_state.pt", weights_only=False)["zero_stage"] == 3
    assert ZeroStageEnum not in torch.serialization.get_safe_globals()
