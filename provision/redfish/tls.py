"""Finding the TLS cause of a failed BMC request (the context itself: `provision/site/tls.py`)."""

from __future__ import annotations

import ssl


def ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error somewhere in an exception's cause/context chain, if there is one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
