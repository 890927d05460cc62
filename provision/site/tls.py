"""TLS to the site's own services (BMCs, MAAS, UFM): one way to build the client context from what the site
declares (`verify_tls` / `verify`, `ca_bundle`), so every service's certificate is checked the same way, and
the TLS cause of a failed connection (`ssl_cause`).

Verification is on unless the site opts out, and the opt-out wins over a bundle; `ca_bundle` replaces the
system trust store, which is how a site trusts its BMCs' or UFM's own CA. One context per verification setting
is shared by every connection (building one costs milliseconds; loading the system trust store, tens of
them). Without verification no trust store is loaded at all: OpenSSL would still look every presented
certificate up in it, about half a millisecond of each handshake.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from provision.errors import BringupError

_CONTEXTS: dict[bool, ssl.SSLContext] = {}


class CaBundleError(BringupError):
    """The CA bundle a site names cannot be loaded."""


def tls_context(verify: bool, ca_bundle: str | Path | None = None, *, service: str) -> ssl.SSLContext:
    """The client context for one of the site's services (`service` names it in the error: "BMC", "UFM")."""
    if ca_bundle and verify:
        try:
            return ssl.create_default_context(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise CaBundleError(f"cannot load the {service} CA bundle {ca_bundle}: {exc}") from None
    if verify not in _CONTEXTS:
        if verify:
            ctx = ssl.create_default_context()
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        _CONTEXTS[verify] = ctx
    return _CONTEXTS[verify]


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
