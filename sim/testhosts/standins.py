"""The stand-in vendor packages of the test hosts' local apt repository: real names, real versions.

Each stand-in carries the files a role looks at (binaries that print what the real ones print, unit
files, a DKMS build that installs kernel modules for the running kernel) and nothing else. The
repositories mirror the vendors' layouts: NVIDIA's CUDA and container-toolkit repositories are flat,
Docker's has `dists/<suite>/stable`, DOCA's is flat; `distro` holds what the Debian archive ships
(Debian 12's zfs-dkms and zfsutils-linux from contrib, linux-headers-<running kernel>) for Debian test hosts,
which have no archive access during a test.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace

DRIVER_BRANCH = "580"
DRIVER_VERSIONS = ("580.159.04", "580.95.05")  # the pinned one first; the older one for the held-version fault
DCGM_VERSION = "4.2.3"
TOOLKIT_VERSION = "1.17.8"
DOCKER_VERSION = "28.3.3"
CONTAINERD_VERSION = "1.7.27"
DOCA_VERSION = "2.9.1"
OFED_VERSION = "24.10-1.1.4"
# Debian 12 (bookworm) contrib: zfs-linux 2.1.11-1+deb12u1 (packages.debian.org/bookworm/zfsutils-linux).
ZFS_DEBIAN12 = "2.1.11-1+deb12u1"
KERNEL = platform.release()
KERNEL_MODULES = ("nvidia", "nvidia-modeset", "nvidia-uvm", "nvidia-peermem")


@dataclass(frozen=True)
class StandIn:
    name: str
    version: str
    repo: str
    description: str
    depends: tuple[str, ...] = ()
    # destination path on the host -> payload file name (under payload/)
    files: tuple[tuple[str, str], ...] = ()
    postinst: str | None = None
    prerm: str | None = None
    # kernel modules (fake ELF objects with a real .modinfo section) put under /usr/src/nvidia-<version>/
    modules: tuple[str, ...] = ()
    substitutions: dict[str, str] = field(default_factory=dict)
    # The page the name, version string and Depends are copied from (tests/ansible/test_standins.py lists them).
    reference: str = ""


CUDA_DEBIAN12 = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
DRIVER_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
FM_GUIDE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"


def _driver(upstream: str, *, fabric_manager: bool) -> list[StandIn]:
    """NVIDIA's CUDA repository for debian12 (what the Debian 12 test hosts' nvidia-cuda source stands for):
    compute-only driver = nvidia-driver-cuda + nvidia-kernel-open-dkms, unversioned names, "-1" revision."""
    ver = f"{upstream}-1"
    subs = {"DRIVER_VERSION": upstream, "VERSION": upstream}
    ref = f"{DRIVER_GUIDE} (Debian, compute-only, open kernel modules); index {CUDA_DEBIAN12}"
    driver = [
        StandIn("nvidia-driver-cuda", ver, "cuda", f"NVIDIA driver CUDA integration components ({upstream})",
                depends=(f"nvidia-smi (= {ver})", f"nvidia-persistenced (= {ver})",
                         f"nvidia-kernel-open-dkms (= {ver}) | nvidia-kernel-dkms (= {ver})"),
                substitutions=subs, reference=ref),
        StandIn("nvidia-kernel-open-dkms", ver, "cuda", f"NVIDIA open kernel modules {upstream} (DKMS)",
                depends=("kmod",), postinst="dkms-postinst", prerm="dkms-prerm", modules=KERNEL_MODULES,
                substitutions=subs, reference=ref),
        StandIn("nvidia-smi", ver, "cuda", f"NVIDIA System Management Interface {upstream}",
                files=(("/usr/bin/nvidia-smi", "nvidia-smi"),
                       ("/usr/share/nvidia-standin/nvidia-smi.table", "nvidia-smi.table")), substitutions=subs,
                reference=ref),
        StandIn("nvidia-persistenced", ver, "cuda", f"NVIDIA persistence daemon {upstream}",
                files=(("/usr/bin/nvidia-persistenced", "nvidia-persistenced"),
                       ("/lib/systemd/system/nvidia-persistenced.service", "nvidia-persistenced.service")),
                substitutions=subs, reference=ref),
    ]
    if not fabric_manager:
        return driver
    b = DRIVER_BRANCH
    return [
        *driver,
        StandIn(f"nvidia-fabricmanager-{b}", ver, "cuda", f"NVIDIA Fabric Manager {upstream}",
                files=(("/usr/bin/nv-fabricmanager", "nv-fabricmanager"),
                       ("/lib/systemd/system/nvidia-fabricmanager.service", "nvidia-fabricmanager.service"),
                       ("/usr/share/nvidia/nvswitch/fabricmanager.cfg", "fabricmanager.cfg")), substitutions=subs,
                reference=f"{FM_GUIDE} (installation, Debian-based: nvidia-fabricmanager-<branch>)"),
        StandIn(f"libnvidia-nscq-{b}", ver, "cuda", f"NVSwitch Configuration and Query library {upstream}",
                substitutions=subs, reference=f"{FM_GUIDE} (NSCQ: libnvidia-nscq-<branch>)"),
    ]


# The other stand-ins' sources (name -> page listing the real package's name, version and Depends).
_REFERENCES = {
    "datacenter-gpu-manager-4-core": "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html",
    "datacenter-gpu-manager-4-cuda12": "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html",
    "datacenter-gpu-manager-exporter": CUDA_DEBIAN12,
    "nvidia-container-toolkit": "https://nvidia.github.io/libnvidia-container/stable/deb/",
    "docker-ce": "https://download.docker.com/linux/debian/dists/bookworm/stable/",
    "docker-ce-cli": "https://download.docker.com/linux/debian/dists/bookworm/stable/",
    "containerd.io": "https://download.docker.com/linux/debian/dists/bookworm/stable/",
    "doca-ofed": "https://linux.mellanox.com/public/repo/doca/",
    f"linux-headers-{KERNEL}": "https://packages.ubuntu.com/search?keywords=linux-headers",
}


def stand_ins() -> list[StandIn]:
    out: list[StandIn] = []
    for upstream in DRIVER_VERSIONS:
        out += _driver(upstream, fabric_manager=upstream == DRIVER_VERSIONS[0])
    dcgm = f"1:{DCGM_VERSION}-1"
    dcgm_subs = {"VERSION": DCGM_VERSION}
    out += [
        StandIn("datacenter-gpu-manager-4-core", dcgm, "cuda", "NVIDIA DCGM 4 core (host engine, dcgmi)",
                files=(("/usr/bin/dcgmi", "dcgmi"), ("/usr/bin/nv-hostengine", "nv-hostengine"),
                       ("/lib/systemd/system/nvidia-dcgm.service", "nvidia-dcgm.service")), substitutions=dcgm_subs),
        StandIn("datacenter-gpu-manager-4-cuda12", dcgm, "cuda", "NVIDIA DCGM 4 CUDA 12 components",
                depends=(f"datacenter-gpu-manager-4-core (= {dcgm})",), substitutions=dcgm_subs),
        StandIn("datacenter-gpu-manager-exporter", f"{DCGM_VERSION}-4.1.1-1", "cuda", "NVIDIA DCGM exporter",
                depends=("datacenter-gpu-manager-4-core",),
                files=(("/usr/bin/dcgm-exporter", "dcgm-exporter"),
                       ("/etc/dcgm-exporter/default-counters.csv", "default-counters.csv")),
                substitutions={"VERSION": f"{DCGM_VERSION}-4.1.1"}),
        StandIn("nvidia-container-toolkit", f"{TOOLKIT_VERSION}-1", "toolkit", "NVIDIA container toolkit",
                files=(("/usr/bin/nvidia-ctk", "nvidia-ctk"),
                       ("/usr/bin/nvidia-container-runtime", "nvidia-container-runtime")),
                substitutions={"VERSION": TOOLKIT_VERSION}),
        StandIn("docker-ce", f"5:{DOCKER_VERSION}-1~debian.12~bookworm", "docker", "Docker engine",
                depends=("docker-ce-cli", "containerd.io"),
                files=(("/usr/bin/dockerd", "dockerd"), ("/lib/systemd/system/docker.service", "docker.service")),
                substitutions={"UPSTREAM": DOCKER_VERSION}),
        StandIn("docker-ce-cli", f"5:{DOCKER_VERSION}-1~debian.12~bookworm", "docker", "Docker CLI",
                files=(("/usr/bin/docker", "docker"),), substitutions={"UPSTREAM": DOCKER_VERSION}),
        StandIn("containerd.io", f"{CONTAINERD_VERSION}-1", "docker", "containerd runtime",
                files=(("/usr/bin/containerd", "containerd"),
                       ("/lib/systemd/system/containerd.service", "containerd.service")),
                substitutions={"UPSTREAM": CONTAINERD_VERSION}),
        StandIn("doca-ofed", f"{DOCA_VERSION}-1", "doca", f"DOCA-OFED {DOCA_VERSION} (OFED {OFED_VERSION})",
                files=(("/usr/bin/ofed_info", "ofed_info"), ("/lib/systemd/system/openibd.service", "openibd.service")),
                substitutions={"VERSION": f"{DOCA_VERSION}-1", "OFED": OFED_VERSION}),
        # The test hosts run the controller's kernel (chroots): the archive's headers package for it.
        StandIn(f"linux-headers-{KERNEL}", f"{KERNEL}-1", "distro", f"Linux kernel headers for {KERNEL}"),
        # Debian 12's zfs (source zfs-linux, contrib): DKMS-built module + tools (roles/zfs_raidz vars/main.yml).
        StandIn("zfs-dkms", ZFS_DEBIAN12, "distro", "OpenZFS filesystem kernel modules for Linux",
                reference="https://packages.debian.org/bookworm/zfs-dkms"),
        StandIn("zfsutils-linux", ZFS_DEBIAN12, "distro", "command-line tools to manage OpenZFS filesystems",
                files=(("/usr/sbin/zpool", "zpool"), ("/usr/sbin/zfs", "zfs")),
                substitutions={"VERSION": ZFS_DEBIAN12.split("+")[0]},  # zfs version: zfs-2.1.11-1
                reference="https://packages.debian.org/bookworm/zfsutils-linux"),
    ]
    return [p if p.reference else replace(p, reference=_REFERENCES[p.name]) for p in out]
