"""The Debian 12 base root filesystem of the test hosts: one debootstrap, cached outside the repository.

Every test host is an overlay over this base, so a run costs one debootstrap the first time and none
after. The base carries the distribution packages the roles install (so a test never reaches Debian's
archive) and is prepared for life as a chroot: services never start from maintainer scripts
(policy-rc.d), no SSH host keys (each host makes its own), no archive sources.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from sim.testhosts.cache import cache_root, locked
from sim.testhosts.errors import TestHostError
from sim.testhosts.proc import run

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# What the roles install from the distribution, and what Ansible needs on a target.
PACKAGES = (
    "systemd", "openssh-server", "python3", "python3-apt", "gpg", "ca-certificates", "kmod", "iproute2",
    "procps", "chrony", "curl", "jq", "numactl", "pciutils", "ethtool", "rsync", "lsof", "linux-cpupower",
    "prometheus-node-exporter",
    # The controller's monitoring (roles/prometheus_server, roles/alertmanager), with promtool and amtool.
    "prometheus", "prometheus-alertmanager",
    # Slurm and MUNGE (roles/munge, roles/slurm_controller, roles/slurm_node; Debian 12's 22.05.8).
    "munge", "slurmctld", "slurmd", "slurm-client",
)
_FORMAT = "2"


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (deb822 `URIs:` or a `deb URL` line), else deb.debian.org."""
    env = os.environ.get("BRINGUP_DEBIAN_MIRROR")
    if env:
        return env
    candidates = [*sorted((sources_dir / "sources.list.d").glob("*.sources")), sources_dir / "sources.list"]
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for match in re.finditer(r"^\s*(?:URIs:\s*(\S+)|deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+))", text, re.MULTILINE):
            uri = match.group(1) or match.group(2)
            if uri and "security" not in uri and uri.rstrip("/").endswith("debian"):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def base_key(packages: tuple[str, ...] = PACKAGES) -> str:
    return hashlib.sha256(f"{_FORMAT} {SUITE} {' '.join(sorted(packages))}".encode()).hexdigest()[:16]


def _prepare(rootfs: Path) -> None:
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# bringup test host: services never start inside the chroot\nexit 101\n")
    policy.chmod(0o755)
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (rootfs / "etc/apt/sources.list").write_text("# bringup test host: no archive; see sources.list.d\n")
    for extra in (rootfs / "etc/apt/sources.list.d").glob("*"):
        extra.unlink()
    lists = rootfs / "var/lib/apt/lists"
    for entry in lists.iterdir():
        if entry.is_file() and entry.name != "lock":
            entry.unlink()
    # No package lists, and an old lists directory: the first apt task with cache_valid_time refreshes,
    # as on a freshly deployed host.
    os.utime(lists, (0, 0))
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/bringup-testhost").write_text("Debian 12 test host root filesystem (bringup sim.testhosts)\n")


def ensure_base(packages: tuple[str, ...] = PACKAGES, *, log: bool = True) -> Path:
    """The cached base root filesystem, made with debootstrap the first time."""
    directory = cache_root() / "testhosts"
    rootfs = directory / f"base-{SUITE}-{base_key(packages)}"
    with locked(directory / "base.lock"):
        if (rootfs / "etc/bringup-testhost").exists():
            return rootfs
        if shutil.which("debootstrap") is None:
            raise TestHostError("debootstrap is not installed (apt-get install debootstrap)")
        mirror = apt_mirror()
        staging = Path(tempfile.mkdtemp(prefix="base-", dir=directory))
        staging.chmod(0o755)
        if log:
            print(f"debootstrap {SUITE} from {mirror} into {rootfs} (once; cached)", file=sys.stderr)
        try:
            run(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(staging), mirror],
                timeout=1800)
            _prepare(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        os.rename(staging, rootfs)
    return rootfs
