"""NVLink state (``nvidia-smi nvlink -s``) and error counters (``nvidia-smi nvlink -e``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome, unknown

STATUS_PROBE = "nvidia-smi-nvlink-s"
ERRORS_PROBE = "nvidia-smi-nvlink-e"

_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)\s*$")
_LINK_STATE = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_LINK_ERROR = re.compile(r"^\s*Link (\d+): ([A-Za-z][A-Za-z ]*?) Errors?: (\d+|N/A)\s*$")
# What NVML prints under a GPU's header instead of its links when none is active (leptonai/gpud#1085, B200;
# NVIDIA/open-gpu-kernel-modules#1150): "NVML: Unable to retrieve NVLink information as all links are inActive".
_ALL_INACTIVE = re.compile(r"^\s*NVML: Unable to retrieve NVLink information as all links are inactive\s*$",
                           re.IGNORECASE)


@dataclass(frozen=True)
class LinkState:
    gpu: int
    link: int
    gbps: float | None  # None: inactive or unreadable
    raw: str


@dataclass(frozen=True)
class LinkErrors:
    gpu: int
    link: int
    counter: str
    value: int | None


def _split_gpus(text: str) -> list[tuple[int, list[str]]]:
    blocks: list[tuple[int, list[str]]] = []
    for line in text.splitlines():
        match = _GPU.match(line.strip())
        if match:
            blocks.append((int(match.group(1)), []))
        elif line.strip():
            if not blocks:
                raise ParseError(f"line before any 'GPU N:' header: {line.strip()[:80]!r}")
            blocks[-1][1].append(line)
    return blocks


def gpus_without_active_links(text: str) -> list[int]:
    """GPUs for which NVML reports that all links are inactive (and so lists none)."""
    return [gpu for gpu, lines in _split_gpus(text) if any(_ALL_INACTIVE.match(line) for line in lines)]


def parse_link_states(text: str) -> list[LinkState]:
    states = []
    for gpu, lines in _split_gpus(text):
        for line in lines:
            if _ALL_INACTIVE.match(line):
                continue
            match = _LINK_STATE.match(line)
            if not match:
                raise ParseError(f"GPU {gpu}: unexpected line {line.strip()[:80]!r}")
            value = match.group(2)
            speed = re.match(r"^([\d.]+) GB/s$", value)
            states.append(LinkState(gpu, int(match.group(1)), float(speed.group(1)) if speed else None, value))
    return states


def parse_link_errors(text: str) -> list[LinkErrors]:
    counters = []
    for gpu, lines in _split_gpus(text):
        for line in lines:
            if _ALL_INACTIVE.match(line):
                continue
            match = _LINK_ERROR.match(line)
            if not match:
                raise ParseError(f"GPU {gpu}: unexpected line {line.strip()[:80]!r}")
            value = match.group(3)
            counters.append(LinkErrors(gpu, int(match.group(1)), match.group(2).strip(),
                                       None if value == "N/A" else int(value)))
    return counters


def _inactive(gpu: int, up: int, want: int, down: list[str]) -> str:
    return f"GPU {gpu}: {up} of {want} links up" + (f" ({'; '.join(down[:4])})" if down else "")


def parse_nvlink_state(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "nvlink_state"
    if rc != 0:
        raise ParseError(f"nvidia-smi nvlink -s exited {rc}")
    states = parse_link_states(output)
    gpus = sorted({s.gpu for s in states} | {g for g, _ in _split_gpus(output)})
    want = exp.gpu.nvlinks_per_gpu
    none_active = set(gpus_without_active_links(output))
    complete = len(gpus) == exp.gpu.count
    short = []  # GPUs with fewer links up than the site wants
    seen_down = []  # of those, the GPUs the report itself shows links down on (its own evidence)
    for gpu in gpus:
        up = [s for s in states if s.gpu == gpu and s.gbps]
        if len(up) < want:
            down = [f"link {s.link}: {s.raw}" for s in states if s.gpu == gpu and not s.gbps]
            if gpu in none_active:
                down.insert(0, "NVML: all links are inactive")
            short.append(_inactive(gpu, len(up), want, down))
            if down:
                seen_down.append(short[-1])
    remediation = ("Reset the GPUs (reboot); if links stay down, reseat the baseboard/NVLink bridges or RMA. "
                   "Never allocate: collectives would fall back to PCIe.")
    if not complete:
        # A report that stops short cannot clear the GPUs it leaves out, nor a listed GPU whose link lines may
        # have been cut; but a link it shows down is down, and that must not be lost with the rest.
        missing = sorted(set(range(exp.gpu.count)) - set(gpus))
        gap = (f"report covers {len(gpus)} of {exp.gpu.count} GPUs" + (
            f"; not seen: GPU {', '.join(str(g) for g in missing)}" if missing else "")
            + ("" if len(gpus) < exp.gpu.count else " (more GPUs than the site declares)"))
        if seen_down:
            return Outcome(name, CRITICAL, f"inactive NVLinks on {len(seen_down)} GPU(s); {gap}",
                           reason="nvlink_inactive", evidence=(*seen_down, gap), remediation=remediation)
        return unknown(name, f"NVLink state of every GPU not known: {gap}", reason="nvlink_report_incomplete",
                       evidence=[gap, *short],
                       remediation="Run `nvidia-smi nvlink -s` on the host: a GPU missing from it is often a GPU "
                       "the driver lost (see gpu_inventory and the kernel log); if all are there, re-run the check.")
    if short:
        return Outcome(name, CRITICAL, f"inactive NVLinks on {len(short)} GPU(s)", reason="nvlink_inactive",
                       evidence=tuple(short), remediation=remediation)
    speeds = sorted({s.gbps for s in states if s.gbps})
    return Outcome(name, OK, f"{len(gpus)} GPU(s) x {want} NVLinks up at {', '.join(f'{v:g}' for v in speeds)} GB/s",
                   metrics=(("nvlinks_up", float(sum(1 for s in states if s.gbps))),))


def parse_nvlink_errors(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "nvlink_errors"
    if rc != 0:
        raise ParseError(f"nvidia-smi nvlink -e exited {rc}")
    counters = parse_link_errors(output)
    gpus = {g for g, _ in _split_gpus(output)}
    if len(gpus) != exp.gpu.count:
        raise ParseError(f"error report covers {len(gpus)} GPUs, site expects {exp.gpu.count} (truncated?)")
    none_active = gpus_without_active_links(output)
    if not counters and not none_active:
        raise ParseError("no link error counters in the report")
    # N/A is not 0: a counter NVML cannot read says nothing about the link.
    readable = [c for c in counters if c.value is not None]
    unread = len(counters) - len(readable)
    notes = tuple(f"GPU {g}: all links inactive, no counters" for g in none_active) + (
        (f"{unread} of {len(counters)} counters read N/A",) if unread else ())
    if not readable:
        return unknown(name, "no NVLink error counter could be read" + (" (all N/A)" if counters else ""),
                       reason="nvlink_counters_unavailable", evidence=notes,
                       remediation="See nvlink_state: links that are down have no counters; with links up, run "
                       "`nvidia-smi nvlink -e` by hand and check the driver and fabric manager.")
    total = sum(c.value or 0 for c in readable)
    over = [c for c in readable if (c.value or 0) > exp.gpu.nvlink_error_max]
    if over:
        return Outcome(name, WARN, f"NVLink error counters above {exp.gpu.nvlink_error_max} on {len(over)} link "
                       "counter(s)", reason="nvlink_errors",
                       evidence=tuple(f"GPU {c.gpu} link {c.link}: {c.counter} {c.value}" for c in over[:16]) + notes,
                       metrics=(("nvlink_errors_total", float(total)),),
                       remediation="Watch whether the counters keep growing under load (nccl all-reduce); "
                       "growing replay/CRC errors mean a marginal link: reseat or RMA.")
    return Outcome(name, OK, f"{len(readable)} NVLink error counters, all within {exp.gpu.nvlink_error_max}"
                   + (f" ({unread} N/A)" if unread else ""), evidence=notes,
                   metrics=(("nvlink_errors_total", float(total)),))


def _no_nvlink(exp: Expectations) -> str | None:
    return None if exp.gpu.nvlinks_per_gpu > 0 and exp.gpu.count > 0 else "site declares no NVLink on this host"


CHECKS = (
    Check("nvlink_state", FAST, (STATUS_PROBE,), single("nvlink_state", STATUS_PROBE, parse_nvlink_state),
          _no_nvlink),
    Check("nvlink_errors", FAST, (ERRORS_PROBE,), single("nvlink_errors", ERRORS_PROBE, parse_nvlink_errors),
          _no_nvlink),
)
