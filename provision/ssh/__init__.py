"""SSH to the hosts (asyncssh): one command per call, with the site's keys, a deadline and an output cap.

The errors are in provision.ssh.errors."""

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

__all__ = ["ENV_ADDRESS_MAP", "ENV_KEY_FILE", "ENV_KNOWN_HOSTS", "Endpoint", "RemoteRun", "SshSettings",
           "TrustOnFirstUse", "load_address_map", "run_command"]
