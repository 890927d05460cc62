"""UFM REST errors, and the one place an HTTP status becomes one of them."""

from __future__ import annotations

from fabric.errors import FabricError
from fabric.ports.actuate import ActionTimeout


class UfmError(FabricError):
    """Base of every UFM client error; the message names the request and what UFM answered."""


class UfmAuthError(UfmError):
    """401/403: the site's UFM credential was refused (never shown)."""


class UfmUnavailable(UfmError):
    """UFM could not be reached, or answered 5xx (503 while it restarts)."""


class UfmTimeout(UfmError):
    """UFM did not answer within the request's deadline."""


class UfmRejected(UfmError):
    """4xx other than auth: the request itself was refused (no such port, bad body)."""


class UfmProtocolError(UfmError):
    """An answer that is not what UFM sends: not JSON, over the size bound, the wrong shape."""


class UfmJobFailed(UfmError):
    """A UFM job ended other than `Completed` (`Completed With Errors`, ...): names the job, its status and summary."""


class UfmJobTimeout(UfmError, ActionTimeout):
    """A UFM job was still `Running` at the deadline: UFM may yet finish it (the next run reads the port)."""


def error_for_status(status: int, what: str, body: str) -> UfmError | None:
    """The error for a UFM answer's status (None when it is a success)."""
    if status < 300:
        return None
    snippet = " ".join(body.split())[:200]
    if status in (401, 403):
        return UfmAuthError(f"{what}: UFM refused the credential (HTTP {status}): check the site's fabric.ufm "
                            "credential (user, password in the environment or vault)")
    if status >= 500:
        return UfmUnavailable(f"{what}: UFM answered HTTP {status} ({snippet or 'no body'}): retry once UFM is up")
    return UfmRejected(f"{what}: UFM refused the request (HTTP {status}): {snippet or 'no body'}")
