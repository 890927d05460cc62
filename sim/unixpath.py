"""Unix socket paths of any length.

bind() and connect() take a Unix socket's path in `sun_path`, 108 bytes with its NUL: a lab whose run
directory is deep (a site under a long path, a test's temporary folder under pytest-xdist's `popen-gwN/`)
would fail to start with "AF_UNIX path too long". A longer path is reached through an open descriptor of its
folder instead (`/proc/self/fd/N/name`: the same file, same folder), for as long as the call takes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SUN_PATH_MAX = 107  # bytes, without the terminating NUL


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """The address to bind or connect `path` with: the path itself when it fits, else a short alias of it."""
    text = str(path)
    if len(os.fsencode(text)) <= SUN_PATH_MAX:
        yield text
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)
