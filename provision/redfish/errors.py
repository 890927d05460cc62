"""Redfish errors: one class per way a BMC conversation fails, each with a triage reason code.

Status codes map to classes in one place (`error_for_status`). Every error carries the request it
answers (method, path, never credentials), the HTTP status when there was one, and the BMC's own
`@Message.ExtendedInfo` messages, so the CLI line and the recorded evidence say what the BMC said.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.errors import BringupError
from provision.state.peer_text import shown

MESSAGE_LIMIT = 500  # a BMC message is kept (shown, recorded) at most this long


class RedfishError(BringupError):
    """Base of every Redfish failure. `reason` is the lifecycle failure code a host gets."""

    reason = "bmc_error"

    def __init__(
        self,
        message: str,
        *,
        endpoint: str = "",
        method: str = "",
        path: str = "",
        status: int | None = None,
        messages: tuple[str, ...] = (),
        message_ids: tuple[str, ...] = (),
    ) -> None:
        self.endpoint = endpoint
        self.method = method
        self.path = path
        self.status = status
        self.messages = messages
        self.message_ids = message_ids
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.endpoint} " if self.endpoint else ""
        request = f"{self.method} {self.path}: " if self.method else ""
        status = f"HTTP {self.status}: " if self.status is not None else ""
        said = f" (BMC says: {'; '.join(self.messages)})" if self.messages else ""
        return f"{where}{request}{status}{self.detail}{said}"

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": type(self).__name__, "detail": self.detail}
        if self.endpoint:
            out["endpoint"] = self.endpoint
        if self.method:
            out["request"] = f"{self.method} {self.path}"
        if self.status is not None:
            out["status"] = self.status
        if self.messages:
            out["bmc_messages"] = list(self.messages)
        if self.message_ids:
            out["message_ids"] = list(self.message_ids)
        return out


class RedfishUnreachable(RedfishError):
    """No TCP connection: refused, no route, DNS, reset before any answer."""

    reason = "bmc_unreachable"


class RedfishTlsError(RedfishError):
    """The TLS handshake failed: certificate not trusted, wrong name, protocol or cipher mismatch."""

    reason = "bmc_tls"


class RedfishTimeout(RedfishError):
    """Connected (or tried to), but no answer within the per-request timeout."""

    reason = "bmc_timeout"


class RedfishAuthError(RedfishError):
    """401/403: wrong user or password, locked account, or not enough privilege. Never retried."""

    reason = "bmc_auth"


class RedfishNotFound(RedfishError):
    """404: the resource does not exist on this BMC."""

    reason = "bmc_not_found"


class RedfishUnsupported(RedfishError):
    """The BMC does not offer what was asked (405/501, or a value missing from AllowableValues)."""

    reason = "bmc_unsupported"


class RedfishServerError(RedfishError):
    """5xx after the bounded retries ran out."""

    reason = "bmc_error_5xx"


class RedfishRequestRejected(RedfishError):
    """Another 4xx: the BMC refused the request as sent (400, 409, 412...)."""

    reason = "bmc_rejected"


class RedfishProtocolError(RedfishError):
    """The answer is not Redfish: not JSON, too large, a redirect, or a required field missing."""

    reason = "bmc_bad_response"


def extended_info(body: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The messages and MessageIds of a Redfish error body (`error.@Message.ExtendedInfo`) or of a
    resource's own `@Message.ExtendedInfo`; empty when there are none. The BMC's text is kept with its
    control characters escaped (`provision.state.peer_text.shown`): it is shown and recorded, never run."""
    if not isinstance(body, Mapping):
        return (), ()
    infos: list[Any] = []
    err = body.get("error")
    if isinstance(err, Mapping):
        infos.extend(err.get("@Message.ExtendedInfo") or [])
        if not infos and isinstance(err.get("message"), str):
            return (shown(err["message"], MESSAGE_LIMIT),), (shown(str(err["code"]), 100),) if err.get("code") else ()
    infos.extend(body.get("@Message.ExtendedInfo") or [])
    messages: list[str] = []
    ids: list[str] = []
    for info in infos:
        if not isinstance(info, Mapping):
            continue
        text = str(info.get("Message") or "").strip()
        resolution = str(info.get("Resolution") or "").strip()
        if text and resolution and resolution.lower() not in {"none", "no response action is required."}:
            text = f"{text} Resolution: {resolution}"
        if text:
            messages.append(shown(text, MESSAGE_LIMIT))
        if info.get("MessageId"):
            ids.append(shown(str(info["MessageId"]), 100))
    return tuple(messages), tuple(ids)


def error_for_status(status: int) -> type[RedfishError]:
    """The one place HTTP status codes become error classes."""
    if status in (401, 403):
        return RedfishAuthError
    if status == 404:
        return RedfishNotFound
    if status in (405, 501):
        return RedfishUnsupported
    if status >= 500:
        return RedfishServerError
    if 300 <= status < 400:
        return RedfishProtocolError
    return RedfishRequestRejected


# Answers that mean the BMC does not serve a resource (a part of the inventory some BMCs lack): callers
# that can do without it note the reason and go on.
NOT_SERVED: tuple[type[RedfishError], ...] = (RedfishNotFound, RedfishUnsupported, RedfishProtocolError)
