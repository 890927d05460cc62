"""Faults a test injects into one running test host, each the way it happens on a real one."""

from __future__ import annotations

from pathlib import Path

import yaml

from sim.testhosts.lab import DISKS, Lab
from sim.testhosts.proc import run
from sim.testhosts.standins import DRIVER_VERSIONS

FAULTS = ("apt_unreachable", "held_wrong_version", "missing_peermem", "disk_mismatch", "ofed_removed")


def _host_vars(lab: Lab, host: str, values: dict[str, object]) -> None:
    path = lab.run_dir / "inventory" / "host_vars" / f"{host}.yml"
    current = yaml.safe_load(path.read_text()) if path.exists() else {}
    path.write_text(yaml.safe_dump({**(current or {}), **values}, sort_keys=True))


def apt_unreachable(lab: Lab, host: str) -> None:
    """The host's Docker repository points at a port where nothing listens (a dead mirror or proxy)."""
    dead = lab.repo_url.rsplit(":", 1)[0] + ":1"
    # One attempt, without apt's own retries: a refused connection fails at once, the rest would be backoff
    # (about a minute) that proves nothing more.
    _host_vars(lab, host, {"container_runtime_docker_repo_url": f"{dead}/docker",
                           "vendor_repo_update_cache_retries": 1})
    (lab.host(host).root / "etc/apt/apt.conf.d/99bringup-fault-no-retries").write_text('Acquire::Retries "0";\n')


def held_wrong_version(lab: Lab, host: str) -> None:
    """An older driver installed and held by hand (apt-mark hold), as someone pinning a host would."""
    root = lab.host(host).root
    old = f"{DRIVER_VERSIONS[1]}-1"
    names = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced"]
    source = root / "etc/apt/sources.list.d/fault-old-driver.sources"
    if not (root / "etc/apt/sources.list.d/nvidia-cuda.sources").exists():  # a host site.yml never configured
        keyring = "/etc/apt/keyrings/bringup-testhost-distro.asc"
        source.write_text(f"Types: deb\nURIs: {lab.repo_url}/cuda/\nSuites: /\nSigned-By: {keyring}\n")
    env = ["env", "DEBIAN_FRONTEND=noninteractive"]
    try:
        run(["chroot", str(root), *env, "apt-get", "-q", "update"], timeout=300)
        run(["chroot", str(root), "apt-mark", "unhold", *names])
        run(["chroot", str(root), *env, "apt-get", "-q", "-y", "--allow-downgrades", "install",
             *(f"{n}={old}" for n in names)], timeout=300)
        run(["chroot", str(root), "apt-mark", "hold", *names])
    finally:
        source.unlink(missing_ok=True)


def missing_peermem(lab: Lab, host: str) -> None:
    """The driver's DKMS build lacks nvidia-peermem (built without OFED): dpkg never installs it, and a
    module already built for the running kernel is gone (as after a kernel update rebuilt without it)."""
    root = lab.host(host).root
    (root / "etc/dpkg/dpkg.cfg.d/bringup-fault-no-peermem").write_text(
        "path-exclude=/usr/src/nvidia-*/nvidia-peermem.ko\n")
    for module in root.glob("lib/modules/*/updates/dkms/nvidia-peermem.ko"):
        module.unlink()
        run(["chroot", str(root), "depmod", "-a", module.parts[-4]])


def disk_mismatch(lab: Lab, host: str) -> None:
    """One of the four data disks is formatted and mounted: three are usable, the site expects four."""
    _host_vars(lab, host, {"bringup_testhost_disks": str(Path(DISKS / "hgx-2os-3data-1scratch.json"))})


def ofed_removed(lab: Lab, host: str) -> None:
    """DOCA-OFED removed by hand (dpkg --purge) under an installed driver: the next run installs OFED again,
    an OFED change below the driver's already built DKMS modules."""
    run(["chroot", str(lab.host(host).root), "dpkg", "--purge", "doca-ofed"])


def inject(lab: Lab, host: str, fault: str) -> None:
    {"apt_unreachable": apt_unreachable, "held_wrong_version": held_wrong_version,
     "missing_peermem": missing_peermem, "disk_mismatch": disk_mismatch,
     "ofed_removed": ofed_removed}[fault](lab, host)
