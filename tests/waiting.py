"""Waiting on a condition in a test: polled, bounded, and saying what did not happen when the time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(what: str, check: Callable[[], object], timeout_s: float = 30.0, every_s: float = 0.1) -> None:
    """Return as soon as `check()` is true; fail naming `what` after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
