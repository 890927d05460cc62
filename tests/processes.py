"""Processes as the tests look at them, read through sim/lifetime.py's /proc parser: the fields of /proc/<pid>/stat
after the *last* ')' (the command name before them, field 2, may itself hold spaces and ')'). Descendants of a
process: `sim.lifetime.descendants`."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from sim import lifetime


def alive(pid: int) -> bool:
    """Running: there, and not a zombie waiting for its parent (or init) to reap it."""
    return lifetime.start_time(pid) is not None


def gone_within(pid: int, within_s: float) -> bool:
    """Whether `pid` stops running within `within_s` seconds (looked at every 20 ms: returns as soon as it is)."""
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def command_line(pid: int) -> str | None:
    """/proc/<pid>/cmdline with its NULs as spaces (what a failing test shows), None once the process is gone."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return None


def still_running(procs: dict[int, int]) -> dict[int, str]:
    """{pid: command line} of the processes of `procs` ({pid: start time}) still running: a pid whose start time
    differs is a later process that reused it, not one of these."""
    left = {}
    for pid, started in procs.items():
        if lifetime.start_time(pid) == started and (line := command_line(pid)) is not None:
            left[pid] = line[:120]
    return left
