"""One profiled training step: where the GPU time of a step goes, by kernel family.

`--profile-step N` runs step N under torch.profiler (CPU and CUDA activity) and rank 0 writes
RUN/profile/step_N.json (kernel families, top kernels) and step_N.txt (PyTorch's own table). The
families answer the usual MFU question first: how much of the step is matmul, attention, NCCL,
elementwise work, or the GPU sitting idle waiting for the host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

# Ordered: the first family whose pattern matches a kernel name wins.
FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nccl", re.compile(r"nccl", re.I)),
    ("attention", re.compile(r"flash|fmha|cudnn.*(attn|sdpa)|sdpa|attention|mha", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|xmma|nvjet|wgmma|matmul|sm\d+_.*_tn|cublas", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
    ("copy", re.compile(r"memcpy|memset|CatArray|copy_kernel|split_with_sizes|chunk_cat", re.I)),
    ("elementwise", re.compile(r"triton_|elementwise|vectorized|reduce_kernel|norm", re.I)),
)


@dataclass(frozen=True)
class KernelTime:
    name: str
    family: str
    calls: int
    device_ms: float


@dataclass(frozen=True)
class StepProfile:
    step: int
    wall_ms: float
    device_busy_ms: float
    families_ms: dict[str, float]
    top: tuple[KernelTime, ...]


# Device-time rows that are not kernels: CUDA runtime calls, stalls and annotations that span kernels
# already counted (counting them would count the same time twice).
NOT_KERNELS = re.compile(
    r"^(cuda[A-Z]|cu[A-Z]|Command Buffer Full|nccl:|ProfilerStep|Optimizer\.|## |record_param_comms)")


def family_of(kernel: str) -> str:
    for family, pattern in FAMILIES:
        if pattern.search(kernel):
            return family
    return "other"


def summarise(step: int, wall_ms: float, kernels: Iterable[tuple[str, int, float]], top_n: int = 25) -> StepProfile:
    """`kernels`: (name, calls, self device ms) for every kernel of the step. NCCL kernels overlap
    compute by design, so `device_busy_ms` (the sum over families) can exceed the wall time."""
    rows = [KernelTime(name, family_of(name), calls, ms) for name, calls, ms in kernels
            if ms > 0 and not NOT_KERNELS.match(name)]
    families: dict[str, float] = {}
    for r in rows:
        families[r.family] = families.get(r.family, 0.0) + r.device_ms
    rows.sort(key=lambda r: r.device_ms, reverse=True)
    return StepProfile(step, wall_ms, sum(families.values()),
                       dict(sorted(families.items(), key=lambda kv: -kv[1])), tuple(rows[:top_n]))


def _device_ms(evt: Any) -> float:
    us: Any = getattr(evt, "self_device_time_total", None)
    if us is None:
        us = getattr(evt, "self_cuda_time_total", 0.0)
    return float(us or 0.0) / 1e3


def memory_by_stream() -> dict[str, dict[str, float]]:
    """The caching allocator's segments per CUDA stream (GiB reserved and allocated in them): a
    block freed by one stream is never given to another, so each stream keeps its own high-water mark."""
    out: dict[str, dict[str, float]] = {}
    if not torch.cuda.is_available():
        return out
    for seg in torch.cuda.memory_snapshot():  # type: ignore[no-untyped-call]
        row = out.setdefault(str(seg.get("stream", "?")), {"reserved_gib": 0.0, "allocated_gib": 0.0, "segments": 0})
        row["reserved_gib"] += float(seg.get("total_size", 0)) / 2**30
        row["allocated_gib"] += float(seg.get("allocated_size", 0)) / 2**30
        row["segments"] += 1
    return out


@contextmanager
def profiled_step(step: int, out_dir: Path, write: bool) -> Iterator[None]:
    """Profile the enclosed step; when `write`, save the summary and PyTorch's table under out_dir."""
    import time

    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        t = time.perf_counter()
        yield
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - t) * 1e3
    if not write:
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    averages = prof.key_averages()
    kernels = [(e.key, int(e.count), _device_ms(e)) for e in averages
               if "CUDA" in str(getattr(e, "device_type", "")) and not getattr(e, "is_user_annotation", False)]
    summary = summarise(step, wall_ms, kernels)
    record = {**asdict(summary), "memory_by_stream": memory_by_stream()}
    (out_dir / f"step_{step}.json").write_text(json.dumps(record, indent=1) + "\n")
    sort_key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    try:
        table = averages.table(sort_by=sort_key, row_limit=40)
    except (KeyError, AttributeError):
        table = averages.table(sort_by="self_cpu_time_total", row_limit=40)
    (out_dir / f"step_{step}.txt").write_text(table + "\n")
