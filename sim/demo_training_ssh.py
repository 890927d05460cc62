"""The demo training stage's way to the hosts (sim/demo_training.py): the SSH path the launcher takes to each
simulated host, a host cut off from it, and the run's rank processes found (and killed) by their environment."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import sys
from pathlib import Path

from provision.site.bounded import read_text
from provision.ssh import ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS


def _closed_port(address: str) -> int:
    """A port nothing listens on at `address` (bound, then let go)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


class SshPath:
    """The launcher's SSH view of the hosts for this stage: a copy of the lab's address map (a host can be cut off
    without touching the lab's), an ssh_config naming each host's endpoint, and an `ssh` that reads it."""

    def __init__(self, folder: Path, environ: dict[str, str]) -> None:
        missing = [k for k in (ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS) if not environ.get(k)]
        real = shutil.which("ssh")
        if missing or real is None:
            raise RuntimeError(f"no SSH path to the simulated hosts: {', '.join(missing) or 'no ssh client'}")
        self.folder, self.ssh = folder, real
        self.key, self.known_hosts = environ[ENV_KEY_FILE], environ[ENV_KNOWN_HOSTS]
        raw = json.loads(read_text(Path(environ[ENV_ADDRESS_MAP]), limit=4 << 20, what="address map"))
        self.endpoints = {str(h): str(a) for h, a in raw.items()}
        self.write()

    def write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "address-map.json").write_text(json.dumps(self.endpoints, indent=1))
        lines = []
        for host, endpoint in sorted(self.endpoints.items()):
            address, _, port = endpoint.rpartition(":")
            lines += [f"Host {host}", f"  HostName {address}", f"  Port {port}", f"  IdentityFile {self.key}",
                      f"  UserKnownHostsFile {self.known_hosts}", "  StrictHostKeyChecking yes",
                      "  IdentitiesOnly yes", "  ConnectTimeout 10", "  LogLevel ERROR"]
        (self.folder / "ssh_config").write_text("\n".join(lines) + "\n")
        wrapper = self.folder / "bin" / "ssh"
        wrapper.parent.mkdir(exist_ok=True)
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(self.ssh)} -F "
                           f"{shlex.quote(str(self.folder / 'ssh_config'))} \"$@\"\n")
        wrapper.chmod(0o755)

    def cut(self, host: str) -> str:
        """Point `host`'s endpoint at a closed port on its own address; the new endpoint."""
        address = self.endpoints[host].rpartition(":")[0]
        self.endpoints[host] = f"{address}:{_closed_port(address)}"
        self.write()
        return self.endpoints[host]

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.folder / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]])
        return {"PATH": path, ENV_ADDRESS_MAP: str(self.folder / "address-map.json")}


def rank_processes(run: Path, host: str | None = None) -> list[int]:
    """This run's rank processes (torchrun and its workers), on `host` or on any: every one carries the run's
    flight-recorder path and its hostfile name in its environment (training/launcher.py's job_env); the
    launcher's ssh clients, which carry the same, are left alone."""
    marker = f"TORCH_NCCL_DEBUG_INFO_TEMP_FILE={run / 'nccl_trace' / 'rank_'}".encode()
    wanted = f"TRAINING_HOST={host}".encode() if host else b"TRAINING_HOST="
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read(1 << 20).split(b"\0")
        except OSError:
            continue
        if marker in env and any(v.startswith(wanted) for v in env) and not _ssh_client(entry.name):
            found.append(int(entry.name))
    return found


def _ssh_client(pid: str) -> bool:
    """The launcher's own `ssh` to a host (it carries the rank's environment too): the controller's, not the host's."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read(4096).split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"ssh"


def kill(pids: list[int]) -> list[int]:
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return killed
