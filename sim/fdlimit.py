"""File-descriptor limit of a simulator process.

One simulator process serves hundreds of endpoints: a listening socket each plus their open
connections. At 512 endpoints that passes the 1,024 soft limit most shells start with, and a
server out of descriptors stops accepting (the clients then see hung endpoints), so each simulator
lifts its soft limit to the hard one before it listens.
"""

from __future__ import annotations

import contextlib
import resource


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
