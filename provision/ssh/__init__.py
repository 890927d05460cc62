"""SSH to the hosts (asyncssh): one command per call, with the site's keys, a deadline and an output cap."""

from provision.ssh.client import (
    ENV_ADDRESS_MAP,
    ENV_KEY_FILE,
    ENV_KNOWN_HOSTS,
    Endpoint,
    RemoteRun,
    SshSettings,
    TrustOnFirstUse,
    load_address_map,
    run_command,
)
from provision.ssh.errors import (
    SshAuthFailed,
    SshConfigError,
    SshConnectTimeout,
    SshDisconnected,
    SshError,
    SshHostKeyMismatch,
    SshRefused,
    SshTimeout,
)

__all__ = ["ENV_ADDRESS_MAP", "ENV_KEY_FILE", "ENV_KNOWN_HOSTS", "Endpoint", "RemoteRun", "SshAuthFailed",
           "SshConfigError", "SshConnectTimeout", "SshDisconnected", "SshError", "SshHostKeyMismatch",
           "SshRefused", "SshSettings", "SshTimeout", "TrustOnFirstUse", "load_address_map", "run_command"]
