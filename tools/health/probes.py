"""A probe is one way of reading the host: an external command or an in-process reader of /sys or /proc.

Its name is also the stem of its files in a replay directory (``<name>.out``, ``<name>.rc``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TOOL_MISSING = "tool_missing"
TIMEOUT = "timeout"
PROBE_ERROR = "probe_error"

# A collector reads files under a root ("/" on a real host, a fake tree in tests) and returns (text, rc).
Collector = Callable[[Path], tuple[str, int]]


@dataclass(frozen=True)
class Probe:
    name: str
    argv: tuple[str, ...] = ()
    collect: Collector | None = None
    timeout_s: float = 10.0
    env: tuple[tuple[str, str], ...] = ()  # added to the command's environment

    def __post_init__(self) -> None:
        if bool(self.argv) == (self.collect is not None):
            raise ValueError(f"probe {self.name}: give exactly one of argv or collect")

    @property
    def describe(self) -> str:
        return " ".join(self.argv) if self.argv else f"read of {self.name} (in-process)"


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    output: str
    rc: int
    # Set when the probe could not run at all; then output and rc say nothing about the host.
    failure: str = ""
    failure_kind: str = ""

    @property
    def ran(self) -> bool:
        return not self.failure


def failed(probe: str, kind: str, message: str, output: str = "", rc: int = -1) -> ProbeResult:
    return ProbeResult(probe, output, rc, failure=message, failure_kind=kind)
