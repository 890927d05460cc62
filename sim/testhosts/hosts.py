"""One test host: an overlay over the base root filesystem, a private /dev, /proc and /run, and its
own sshd on its own loopback address. `start` brings it up; `stop` leaves no process and no mount. The sshd
(`-D`: it does not detach) and its sessions carry the binding of the process that called `start`
(sim/lifetime.py: `lab.claim` made it) and die with it; its mounts, each recorded before it is made (`mount`),
are unmounted by the same watchdog.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim import lifetime
from sim.addresses import TEST_HOSTS, check_loopback
from sim.testhosts.errors import TestHostError
from sim.testhosts.proc import run

# Character devices a chroot needs: (name, major, minor, mode).
_DEVICES = (("null", 1, 3, 0o666), ("zero", 1, 5, 0o666), ("full", 1, 7, 0o666), ("random", 1, 8, 0o666),
            ("urandom", 1, 9, 0o666), ("tty", 5, 0, 0o666))


@dataclass(frozen=True)
class TestHost:
    __test__ = False  # not a pytest test class

    name: str
    address: str
    directory: Path  # holds upper/, work/, root/ and the sshd log

    @property
    def root(self) -> Path:
        return self.directory / "root"

    @property
    def pid_file(self) -> Path:
        return self.directory / "sshd.pid"


def mount(argv: list[str]) -> None:
    """`mount ... POINT`, recorded first for the watchdog of the starter above (sim/lifetime.py): should the
    starter die before `stop`, the mount goes with its processes."""
    lifetime.will_mount(argv[-1])
    run(argv)


def _mount(host: TestHost, base: Path) -> None:
    for sub in ("upper", "work", "root"):
        (host.directory / sub).mkdir(parents=True, exist_ok=True)
    if not lifetime.mounted_below(host.root):
        mount(["mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={base},upperdir={host.directory / 'upper'},workdir={host.directory / 'work'}",
               str(host.root)])
    root = host.root
    mount(["mount", "-t", "proc", "proc", str(root / "proc")])
    mount(["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m,nosuid", "tmpfs", str(root / "dev")])
    for name, major, minor, mode in _DEVICES:
        node = root / "dev" / name
        os.mknod(node, 0o020000 | mode, os.makedev(major, minor))
        node.chmod(mode)
    (root / "dev/pts").mkdir()
    (root / "dev/shm").mkdir()
    mount(["mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620", "devpts", str(root / "dev/pts")])
    (root / "dev/ptmx").symlink_to("pts/ptmx")
    for link, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        (root / "dev" / link).symlink_to(target)
    mount(["mount", "-t", "tmpfs", "-o", "mode=0755,size=64m,nosuid,nodev", "tmpfs", str(root / "run")])
    (root / "run/sshd").mkdir(mode=0o755)
    (root / "run/lock").mkdir(mode=0o1777)


def configure(host: TestHost, authorized_key: str, extra_files: dict[str, str]) -> str:
    """Per-host files in the overlay (before sshd starts); returns the host's public SSH key."""
    root = host.root
    (root / "etc/hostname").write_text(host.name + "\n")
    (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n{host.address} {host.name}\n")
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(authorized_key.strip() + "\n")
    (ssh_dir / "authorized_keys").chmod(0o600)
    key = root / "etc/ssh/ssh_host_ed25519_key"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}", "-f", str(key)])
    (root / "etc/ssh/sshd_config.d/bringup-testhost.conf").write_text(
        "# bringup test host: root by key only, on this host's loopback address\n"
        f"ListenAddress {host.address}\nPort 22\nHostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nPidFile /run/sshd.pid\nMaxSessions 64\nMaxStartups 64:30:128\n"
    )
    for relative, content in extra_files.items():
        target = root / relative.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().strip()


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_port(address: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def start(host: TestHost, base: Path, authorized_key: str, extra_files: dict[str, str],
          prepare: Callable[[TestHost], None] | None = None) -> str:
    """Mount and configure the host (then `prepare` it) and start its sshd; returns its public host key."""
    if ipaddress.ip_address(check_loopback(host.address)) not in TEST_HOSTS:
        raise TestHostError(f"{host.name}: {host.address} is outside the test-host range {TEST_HOSTS}")
    if _answers(host.address, 22):
        raise TestHostError(f"{host.name}: {host.address}:22 already answers (another run's test host?): "
                            "`python -m sim.testhosts down` that run first")
    host.directory.mkdir(parents=True, exist_ok=True)
    _mount(host, base)
    public_key = configure(host, authorized_key, extra_files)
    if prepare is not None:
        prepare(host)
    log = (host.directory / "sshd.log").open("ab")
    # Its own UTS namespace gives the host its own hostname; the network stays the machine's loopback. The shell
    # stays as sshd's parent: sshd writes its process title over its environment, where sim/lifetime.py finds
    # what to end; the shell's keeps it, and sshd and its sessions are the shell's descendants.
    argv = ["unshare", "--uts", "chroot", str(host.root), "/bin/sh", "-c",
            f"hostname {host.name} && /usr/sbin/sshd -D -e; exit $?"]
    process = subprocess.Popen(argv, stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    host.pid_file.write_text(f"{process.pid}\n")
    if not _wait_port(host.address, 22, 15.0):
        stop(host)
        tail = (host.directory / "sshd.log").read_text(errors="replace")[-800:]
        raise TestHostError(f"{host.name}: sshd did not listen on {host.address}:22 within 15 s\n{tail}")
    return public_key


def _processes_in(root: Path) -> list[int]:
    """Every process whose root directory is inside `root` (sshd, sessions, anything they started)."""
    target = str(root.resolve())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            proc_root = os.readlink(f"/proc/{entry}/root")
        except OSError:
            continue
        if proc_root == target or proc_root.startswith(target + "/"):
            found.append(int(entry))
    return found


def _kill_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop(host: TestHost) -> list[str]:
    """Stop every process of the host and remove every mount; returns what could not be cleaned."""
    problems: list[str] = []
    if host.pid_file.exists():
        try:
            pgid = int(host.pid_file.read_text().strip())
            os.killpg(pgid, signal.SIGTERM)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5.0
    while (left := _processes_in(host.root)) and time.monotonic() < deadline:
        _kill_all(left, signal.SIGTERM if time.monotonic() < deadline - 3.0 else signal.SIGKILL)
        time.sleep(0.1)
    if left := _processes_in(host.root):
        _kill_all(left, signal.SIGKILL)
        time.sleep(0.2)
        if left := _processes_in(host.root):
            problems.append(f"{host.name}: processes {left} survived SIGKILL")
    undone = []
    for point in lifetime.mounted_below(host.root):
        done = subprocess.run(["umount", point], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            problems.append(f"{host.name}: umount {point}: {done.stderr.strip()}")
        else:
            undone.append(point)
    lifetime.unmounted(undone)
    host.pid_file.unlink(missing_ok=True)
    return problems
