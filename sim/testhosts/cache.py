"""Where the test hosts keep what outlives a run: outside the repository, reused across runs and clones."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    """`$BRINGUP_CACHE` or /var/cache/bringup (as root), else ~/.cache/bringup."""
    env = os.environ.get("BRINGUP_CACHE")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/bringup")
    return Path.home() / ".cache" / "bringup"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created), so two runs never build the same cache entry at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
