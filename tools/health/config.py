"""Expectations for one host, rendered by the controller from the site file (JSON), validated at load.

Nothing here pins a version, a count or a site figure: those come from the file. The defaults are
policy (thresholds, Xid lists) that a site may override.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

# Hardware Xids Imbue treated as critical (../shared/REFERENCE.md, "GPUs"): 48 ... 125. Then codes from NVIDIA's
# Xid catalogue for Ampere and newer (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html):
# 140 UNRECOVERABLE_ECC_ERROR_ESCAPE and 143 GPU_INIT_ERROR (immediate action RESET_GPU); 144-150 the NVLink5
# errors SAW, RLW, TLW, TREX, NVLPW_CTRL, NETIR, MSE (B100/GB200; their lines say "Fatal" or "Nonfatal", and
# kernel_log judges a Nonfatal one unhealthy, not critical); 154 GPU_RECOVERY_ACTION_CHANGED, which kernel_log
# judges by the action its text names ("... to 0x0 (None)" is no action). shared/realdata holds real Xid 45
# lines "caused by previous Xid 145/149" (NVIDIA/open-gpu-kernel-modules#1150).
DEFAULT_CRITICAL_XIDS: tuple[int, ...] = (
    48, 56, 57, 58, 62, 63, 64, *range(68, 78), *range(79, 87), 88, 89, 92, *range(94, 106),
    *range(110, 121), 122, 123, 124, 125, 140, 143, *range(144, 151), 154,
)

DEFAULT_SUSPICIOUS_CLOCK_EVENTS: tuple[str, ...] = (
    "HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown",
)

DEFAULT_IB_COUNTER_MAX: Mapping[str, int] = {
    "symbol_error": 0,
    "link_error_recovery": 0,
    "link_downed": 0,
    "port_rcv_errors": 0,
    "port_rcv_remote_physical_errors": 0,
    "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 0,
}


@dataclass(frozen=True)
class GpuExpect:
    count: int
    model: str
    driver_version: str | None = None
    cuda_version: str | None = None
    vbios_versions: tuple[str, ...] = ()
    ecc_required: bool = True
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlinks_per_gpu: int = 0
    nvlink_error_max: int = 0
    nvswitch: bool = False
    peermem_required: bool = False
    suspicious_clock_events: tuple[str, ...] = DEFAULT_SUSPICIOUS_CLOCK_EVENTS


@dataclass(frozen=True)
class IbExpect:
    hca_count: int = 0
    active_ports: int | None = None  # default: one active port per HCA
    rate_gbps: float | None = None
    width: str | None = None  # e.g. "4X"
    link_layer: str = "InfiniBand"
    firmware: tuple[str, ...] = ()
    firmware_query: bool = False  # also read the HCAs' firmware with `mlxfwmanager --query` (mlxfw.py)
    pcie_gen: int | None = None
    pcie_width: int | None = None
    gpu_nic_affinity: bool = False  # every GPU must have a NIC at PIX/PXB in `nvidia-smi topo -m`
    counter_max: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_IB_COUNTER_MAX))


@dataclass(frozen=True)
class KernelLogExpect:
    xid_critical: tuple[int, ...] = DEFAULT_CRITICAL_XIDS
    sxid_expected: tuple[int, ...] = ()
    # Regular expressions (re.search) for kernel log lines at warning level or above that are normal here.
    expected_patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class SystemExpect:
    swap_allowed: bool = False
    cpu_governor: str | None = None
    clock_sync_required: bool = True
    docker_image: str | None = None  # image for `docker run --gpus all`; absent: docker is not expected


@dataclass(frozen=True)
class StorageExpect:
    disk_max_used_pct: float = 95.0
    zpools: tuple[str, ...] = ()


@dataclass(frozen=True)
class LongExpect:
    # Sustained bf16 matmul rate every GPU must hold under its power limit (not the short-burst peak: an H200
    # at 700 W sustains 654-666 TFLOP/s on normal-distributed inputs, 794-812 only for a few seconds).
    stress_tflops_floor: float
    membw_floor_gbps: float
    allreduce_busbw_floor_gbps: float
    python: str | None = None  # interpreter that has PyTorch; default: the one running the agent
    stress_seconds: float = 30.0
    matmul_size: int = 8192
    membw_mib: int = 4096
    allreduce_sizes_mib: tuple[int, ...] = (1024, 2048, 4096)
    allreduce_iters: int = 20
    # A GPU whose sustained rate is more than this far below the median of the host's other GPUs (same load,
    # same run) is a straggler even above the floor.
    stress_peer_tolerance_pct: float = 5.0
    # Extra environment for the GPU worker (NCCL tuning). NVLink multicast stays off whatever this says.
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Timeouts:
    command_s: float = 10.0
    docker_s: float = 90.0
    long_margin_s: float = 240.0  # added to the work a long check is asked to do


@dataclass(frozen=True)
class Expectations:
    gpu: GpuExpect
    host: str | None = None
    schema_version: int = 1
    ib: IbExpect = field(default_factory=IbExpect)
    kernel_log: KernelLogExpect = field(default_factory=KernelLogExpect)
    system: SystemExpect = field(default_factory=SystemExpect)
    storage: StorageExpect = field(default_factory=StorageExpect)
    long: LongExpect | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)


SCHEMA_VERSION = 1


# A rendered config is a few kilobytes; anything near this is not one (or is /dev/zero).
MAX_CONFIG_BYTES = 1 << 20


def _read_config(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ConfigError([f"{path}: not a regular file"])
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc}"]) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError([f"{path}: larger than {MAX_CONFIG_BYTES} bytes: not a health config"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: cannot read: not UTF-8: {exc}"]) from exc


def load_config(path: Path) -> Expectations:
    text = _read_config(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}: not JSON: {exc}"]) from exc
    except RecursionError:
        raise ConfigError([f"{path}: not a health config: JSON nested too deeply"]) from None
    except ValueError as exc:  # e.g. an integer longer than the interpreter converts
        raise ConfigError([f"{path}: not JSON the agent reads: {exc}"]) from exc
    return parse_config(data)


def parse_config(data: Any) -> Expectations:
    problems: list[str] = []
    result = _build(Expectations, data, "", problems)
    if not problems and isinstance(result, Expectations):
        problems.extend(_semantic_problems(result))
    if problems:
        raise ConfigError(problems)
    assert isinstance(result, Expectations)
    return result


# Bounds of every count, size and duration (inclusive): a value outside is a rendering mistake, and one as
# large as 1e30 would be used as given (a loop bound, an allocation, a timeout that never comes).
_DAY_S = 86400.0
_RANGES: tuple[tuple[str, float, float], ...] = (
    ("gpu.count", 0, 64), ("gpu.pcie_gen", 1, 7), ("gpu.pcie_width", 1, 32), ("gpu.nvlinks_per_gpu", 0, 64),
    ("gpu.nvlink_error_max", 0, 2**53),
    ("ib.hca_count", 0, 64), ("ib.active_ports", 0, 256), ("ib.rate_gbps", 0.001, 10_000), ("ib.pcie_gen", 1, 7),
    ("ib.pcie_width", 1, 32),
    ("long.stress_tflops_floor", 0.001, 1e6), ("long.membw_floor_gbps", 0.001, 1e6),
    ("long.allreduce_busbw_floor_gbps", 0.001, 1e6), ("long.stress_seconds", 0.001, _DAY_S),
    ("long.stress_peer_tolerance_pct", 0, 100),
    ("long.matmul_size", 1, 65536), ("long.membw_mib", 1, 1 << 20), ("long.allreduce_iters", 1, 100_000),
    ("timeouts.command_s", 0.001, _DAY_S), ("timeouts.docker_s", 0.001, _DAY_S),
    ("timeouts.long_margin_s", 0, _DAY_S),
)


def _value(exp: Expectations, dotted: str) -> Any:
    section, name = dotted.split(".")
    holder = getattr(exp, section)
    return None if holder is None else getattr(holder, name, None)


def _range_problems(exp: Expectations) -> list[str]:
    problems = []
    for dotted, low, high in _RANGES:
        value = _value(exp, dotted)
        if value is not None and not low <= value <= high:
            problems.append(f"{dotted}: {value!r} is out of range (must be {low:g} to {high:g})")
    for name, limit in exp.ib.counter_max.items():
        if not 0 <= limit <= 2**53:
            problems.append(f"ib.counter_max.{name}: {limit!r} is out of range (must be 0 to 2^53)")
    if exp.long is not None and any(not 1 <= m <= 1 << 20 for m in exp.long.allreduce_sizes_mib):
        problems.append("long.allreduce_sizes_mib: each size must be 1 to 1048576 MiB")
    return problems


def _semantic_problems(exp: Expectations) -> list[str]:
    problems = []
    if exp.schema_version != SCHEMA_VERSION:
        problems.append(f"schema_version: this agent reads version {SCHEMA_VERSION}, not {exp.schema_version}")
    if exp.gpu.count < 0:
        problems.append("gpu.count: must be >= 0")
    if exp.ib.hca_count < 0:
        problems.append("ib.hca_count: must be >= 0")
    if not 0 < exp.storage.disk_max_used_pct <= 100:
        problems.append("storage.disk_max_used_pct: must be in (0, 100]")
    for i, pattern in enumerate(exp.kernel_log.expected_patterns):
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            problems.append(f"kernel_log.expected_patterns[{i}]: not a regular expression: {exc}")
    if exp.long is not None:
        if exp.long.stress_seconds <= 0:
            problems.append("long.stress_seconds: must be > 0")
        if not exp.long.allreduce_sizes_mib or min(exp.long.allreduce_sizes_mib) <= 0:
            problems.append("long.allreduce_sizes_mib: must list sizes > 0")
    already = {p.split(":")[0] for p in problems}
    return problems + [p for p in _range_problems(exp) if p.split(":")[0] not in already]


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _build(tp: Any, value: Any, where: str, problems: list[str]) -> Any:
    label = where or "<top>"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value, where, problems)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build_dataclass(tp, value, where, problems)
    if origin is tuple:
        (item_tp, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, list):
            problems.append(f"{label}: expected a list, got {type(value).__name__}")
            return ()
        return tuple(_build(item_tp, v, f"{where}[{i}]", problems) for i, v in enumerate(value))
    if origin is Mapping:
        _key_tp, val_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            problems.append(f"{label}: expected an object, got {type(value).__name__}")
            return {}
        return {str(k): _build(val_tp, v, f"{where}.{k}", problems) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{label}: expected true/false, got {type(value).__name__}")
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"{label}: expected an integer, got {type(value).__name__}")
        elif abs(value) > 2**53:
            problems.append(f"{label}: integer out of range (more than 2^53)")
        return value
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"{label}: expected a number, got {type(value).__name__}")
            return value
        if (isinstance(value, int) and abs(value) > 2**53) or not math.isfinite(value):
            problems.append(f"{label}: expected a finite number, got {value!r}"[:200])
            return value
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{label}: expected a string, got {type(value).__name__}")
        return value
    raise TypeError(f"config schema has an unsupported type {_type_name(tp)} at {label}")


def _build_dataclass(cls: type, value: Any, where: str, problems: list[str]) -> Any:
    label = where or "<top>"
    if not isinstance(value, dict):
        problems.append(f"{label}: expected an object, got {type(value).__name__}")
        return None
    before = len(problems)
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in value:
        if key not in known:
            problems.append(f"{where + '.' if where else ''}{key}: unknown key (known: {', '.join(sorted(known))})")
    kwargs: dict[str, Any] = {}
    for name, fld in known.items():
        sub = f"{where}.{name}" if where else name
        if name in value:
            kwargs[name] = _build(hints[name], value[name], sub, problems)
        elif fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: required key missing")
    if len(problems) > before:
        return None
    return cls(**kwargs)
