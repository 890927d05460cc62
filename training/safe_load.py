"""Checkpoints are read without running code from them (issue 38). A checkpoint may come from a shared
filesystem or another team, and the formats it is made of are pickles, which can call anything while
they are read. Every read goes through one of these:

- `torch_load`: `torch.load(weights_only=True)` with only the named extra types allowed (DeepSpeed's
  ZeRO-3 states need two: `deepspeed_globals`); a refusal names the file.
- `MetadataUnpickler` / `SafeFileSystemReader`: the DCP `.metadata` file is a plain pickle (DCP reads
  it with `pickle.load`); this reader allows only the metadata's own classes, torch.Size and dtypes.
- `SafeLoadPlanner`: DCP entries that are not tensors (the optimizer's hyperparameters) are read with
  `weights_only=True` (DCP's default planner uses `weights_only=False`).
- `weights_only_loads`: for DeepSpeed's own readers (`zero_to_fp32`, `ds_to_universal`, the ZeRO-3
  universal load), which call `torch.load(weights_only=False)` themselves, torch's
  `TORCH_FORCE_WEIGHTS_ONLY_LOAD` is set for the duration, so those calls are restricted too;
  `check_torch_files` reads each file's pickle statically first, so a refusal names the file.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import re
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import ReadItem

FORCE_ENV = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
NO_FORCE_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


class CheckpointRefused(ValueError):
    """A checkpoint file that names a callable or type a checkpoint never holds (it would run code
    when read), or that is not in a format read here. Nothing from it was run."""


def _refused(what: str, name: str) -> CheckpointRefused:
    return CheckpointRefused(f"{what}: refused to load: it names {name}, which is not one of the types a "
                             f"checkpoint holds (reading it would run code); nothing from it was run")


def _global_named(message: str) -> str | None:
    found = re.search(r"GLOBAL (\S+)", message)
    return found.group(1) if found else None


def _one_line(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip() and not ln.startswith("Weights only load failed")]
    return lines[0] if lines else message.strip()


def refusal(what: str, exc: BaseException) -> CheckpointRefused:
    """torch's weights-only refusal (several lines, advice to load unsafely) as one line naming `what`."""
    name = _global_named(str(exc))
    if name is not None:
        return _refused(what, name)
    return CheckpointRefused(f"{what}: refused to load: {_one_line(str(exc))}; nothing from it was run")


def allowing(allowed: Iterable[Any]) -> contextlib.AbstractContextManager[None]:
    """torch's `safe_globals` for those of `allowed` not allowed already: its exit removes what it was
    given, so a nested one with the same types would take them from the enclosing one."""
    present = torch.serialization.get_safe_globals()
    return torch.serialization.safe_globals([g for g in allowed if g not in present])


def deepspeed_globals() -> list[Any]:
    """The only non-torch types in DeepSpeed's ZeRO-3 checkpoints, model and optimizer states and their
    universal conversion (measured on DeepSpeed 0.19.8 with bf16): the optimizer states hold the static
    `LossScaler` (a number) and `ZeroStageEnum` (an int enum). `DynamicLossScaler` is fp16 only, which
    this job never configures."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler  # type: ignore[import-untyped]
    from deepspeed.runtime.zero.config import ZeroStageEnum  # type: ignore[import-untyped]

    return [LossScaler, ZeroStageEnum]


def torch_load(f: str | Path | IO[bytes], map_location: Any = "cpu", *, allowed: Iterable[Any] = (),
               what: str | None = None) -> Any:
    """`torch.load(weights_only=True)`, with `allowed` added to torch's allow-list for this call only."""
    label = what if what is not None else str(f)
    try:
        with allowing(allowed):
            return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise refusal(label, e) from None


def check_torch_files(files: Iterable[Path], allowed: Iterable[Any] = ()) -> int:
    """Read the pickle of every `torch.save` file statically (its `data.pkl` only, no tensor bytes, nothing
    called) and refuse the first that names a global outside torch's weights-only list and `allowed`,
    or that is not a torch.save zip archive (the legacy format, a bare pickle). Returns the files checked."""
    n = 0
    with allowing(allowed):
        for path in sorted(files):
            if not zipfile.is_zipfile(path):
                raise CheckpointRefused(f"{path}: refused to load: not a torch.save zip archive (a bare pickle "
                                        f"or the legacy format, which is not read); nothing from it was run")
            try:
                unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
            except (ValueError, RuntimeError, KeyError) as e:
                raise CheckpointRefused(f"{path}: refused to load: {_one_line(str(e))}") from None
            if unsafe:
                raise _refused(str(path), ", ".join(sorted(unsafe)))
            n += 1
    return n


@contextlib.contextmanager
def weights_only_loads(what: Path, allowed: Iterable[Any] = ()) -> Iterator[None]:
    """Every `torch.load` in this process (and in processes it forks) is weights-only for the duration,
    whatever its caller asks, with `allowed` added; a refusal becomes one line naming `what`."""
    saved = {k: os.environ.get(k) for k in (FORCE_ENV, NO_FORCE_ENV)}
    os.environ[FORCE_ENV] = "1"
    os.environ.pop(NO_FORCE_ENV, None)
    try:
        with allowing(allowed):
            yield
    except pickle.UnpicklingError as e:
        raise refusal(f"{what} (a file in it)", e) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# DCP's `.metadata`: a pickle of these classes (torch 2.13), torch.Size, dtypes and the checkpoint's path.
_DCP = "torch.distributed.checkpoint.metadata"
METADATA_GLOBALS = frozenset({
    *((_DCP, n) for n in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                         "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING")),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # a layout by its name, from torch's own table
    ("pathlib", "PosixPath"),  # storage_meta.checkpoint_id
})
_DTYPES = frozenset(name for name, value in vars(torch).items() if isinstance(value, torch.dtype))


class MetadataUnpickler(pickle.Unpickler):
    """A plain pickle reader that resolves only `METADATA_GLOBALS` and torch's dtypes: anything else (a
    function to call, another class) is refused before it is imported. No persistent ids."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in METADATA_GLOBALS or (module == "torch" and name in _DTYPES):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"GLOBAL {module}.{name} is not allowed")


def read_dcp_metadata(path: Path, stream: IO[bytes]) -> Metadata:
    try:
        metadata = MetadataUnpickler(stream).load()
    except pickle.UnpicklingError as e:
        name = _global_named(str(e))
        raise (_refused(str(path), name) if name else CheckpointRefused(f"{path}: unreadable metadata ({e})")) from None
    except (EOFError, AttributeError, ValueError, TypeError, IndexError) as e:
        raise CheckpointRefused(f"{path}: unreadable checkpoint metadata ({type(e).__name__}: {e})") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointRefused(f"{path}: not DCP checkpoint metadata (a {type(metadata).__name__})")
    return metadata


class SafeFileSystemReader(FileSystemReader):
    """DCP's file reader with the metadata read by `MetadataUnpickler`; tensors DCP already reads with
    `weights_only=True`."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._metadata: Metadata | None = None

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id and Path(checkpoint_id) != Path(self.path):
            self._metadata = None  # another checkpoint
        super().reset(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        """The global `.metadata` (kept: `dcp_load` reads it before DCP does), or rank `rank`'s."""
        rank = kwargs.get("rank")
        metadata = self._metadata if rank is None else None
        if metadata is None:
            path = Path(self._get_metadata_path(rank))
            with self.fs.create_stream(path, "rb") as stream:
                metadata = read_dcp_metadata(path, cast(IO[bytes], stream))
            if rank is None:
                self._metadata = metadata
        if metadata.storage_meta is None:
            from torch.distributed.checkpoint.metadata import StorageMeta

            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's default planner, reading the entries stored as bytes with `weights_only=True`."""

    def __init__(self, checkpoint: Path) -> None:
        super().__init__()
        self.checkpoint = checkpoint

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        obj = torch_load(value, what=f"{self.checkpoint} (entry {fqn})")
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[fqn], obj)
        else:
            self.state_dict[fqn] = obj


def dcp_load(state: dict[str, Any], path: Path, *, no_dist: bool = False) -> None:
    """`torch.distributed.checkpoint.load` of `path` into `state` through the restricted reader and planner."""
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict_loader import load

    reader = SafeFileSystemReader(str(path))
    if (path / ".metadata").is_file():
        # Read here first: inside `load` a refusal would come back as an AssertionError listing every
        # attempt (the global metadata, then a per-rank one), wrapped in one exception for all ranks.
        reader.read_metadata()
    try:
        load(state, checkpoint_id=str(path), storage_reader=reader, planner=SafeLoadPlanner(path), no_dist=no_dist)
    except CheckpointException as e:  # DCP gathers every rank's exception, tracebacks and all, into one
        refused = [exc for exc, _ in e.failures.values() if isinstance(exc, CheckpointRefused)]
        if refused:
            raise refused[0] from None
        raise
