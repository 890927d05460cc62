"""SSH errors: one tree under the project error.

Every failure to reach a host carries a machine-readable `reason` (what the state store records for it).
"""

from __future__ import annotations

from provision.errors import BringupError


class SshConfigError(BringupError):
    """The SSH settings cannot be used: an unreadable key, known_hosts or address map file."""


class SshError(BringupError):
    """Reaching a host over SSH failed; `reason` is what the lifecycle records."""

    reason = "ssh_error"

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(f"{host}: {message}")


class SshRefused(SshError):
    reason = "ssh_refused"


class SshConnectTimeout(SshError):
    reason = "ssh_connect_timeout"


class SshHostKeyMismatch(SshError):
    reason = "ssh_host_key_mismatch"


class SshAuthFailed(SshError):
    reason = "ssh_auth_failed"


class SshDisconnected(SshError):
    reason = "ssh_disconnected"


class SshProtocolError(SshError):
    """The peer does not speak SSH as it should: a bad banner, a malformed or impossible packet."""

    reason = "ssh_bad_response"


class SshTimeout(SshError):
    """The command did not finish within the per-host timeout (the host or its agent hangs)."""

    reason = "health_timeout"
