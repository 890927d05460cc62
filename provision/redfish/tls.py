"""TLS for BMC connections: one shared context per verification setting, and finding the TLS cause of a failure."""

from __future__ import annotations

import ssl

from provision.redfish.errors import RedfishTlsError

_CONTEXTS: dict[bool, ssl.SSLContext] = {}


def tls_context(verify: bool, ca_bundle: str | None = None) -> ssl.SSLContext:
    """One context for every BMC of a site (building one costs milliseconds; loading the system
    trust store, tens of them).

    Verification is on unless the site opts out; `ca_bundle` replaces the system trust store, which is
    how a site trusts its iDRACs' own CA. Without verification no trust store is loaded at all: OpenSSL
    still looks every presented certificate up in it, about half a millisecond of each handshake.
    """
    if ca_bundle and verify:
        try:
            return ssl.create_default_context(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            raise RedfishTlsError(f"cannot load the BMC CA bundle {ca_bundle}: {exc}") from None
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
