"""MAAS API errors, mapped from HTTP status codes in one place (`error_for`)."""

from __future__ import annotations

from provision.errors import BringupError


class MaasError(BringupError):
    """Anything that went wrong talking to MAAS."""


class MaasAuthError(MaasError):
    """401/403: the API key is wrong, expired or lacks the rights."""


class MaasNotFound(MaasError):
    """404: no such machine (or endpoint)."""


class MaasValidationError(MaasError):
    """400: MAAS rejected the form; `fields` holds its `{field: [messages]}`."""

    def __init__(self, message: str, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.fields = fields or {}


class MaasConflict(MaasError):
    """409: the machine's status does not allow the action (MAAS's NodeStateViolation)."""


class MaasServerError(MaasError):
    """5xx: MAAS itself failed or is overloaded."""


class MaasBadResponse(MaasError):
    """MAAS's answer cannot be used: over the size cap, not JSON, or JSON nested too deeply to parse."""


class MaasUnreachable(MaasError):
    """No answer: connection refused, DNS, TLS or timeout."""


class MaasNoAnswer(MaasUnreachable):
    """The request went out, or may have, and no answer came back (a read timeout, a dropped
    connection): MAAS may or may not have acted on it, so a non-idempotent request is not re-sent."""


def error_for(status: int, text: str, what: str) -> MaasError:
    snippet = text.strip()[:300]
    if status in (401, 403):
        return MaasAuthError(f"MAAS refused the API key ({status}) for {what}: {snippet}")
    if status == 404:
        return MaasNotFound(f"MAAS: {what}: not found")
    if status == 400:
        from provision.state.peer_json import loads

        try:
            fields = loads(text)
        except (ValueError, RecursionError):
            fields = None
        if isinstance(fields, dict):
            detail = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in fields.items())
            return MaasValidationError(f"MAAS rejected {what}: {detail}", fields)
        return MaasValidationError(f"MAAS rejected {what}: {snippet}")
    if status == 409:
        return MaasConflict(f"MAAS: {what}: {snippet}")
    if status >= 500:
        return MaasServerError(f"MAAS server error {status} for {what}: {snippet}")
    return MaasError(f"MAAS answered {status} for {what}: {snippet}")
