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
from dataclasses import dataclass, field
from typing import Any

DRIVER_BRANCH = "580"
# NVIDIA's CUDA repository: the pinned one first; the older one for the version bump and the held-version fault.
DRIVER_VERSIONS = ("580.159.04", "580.95.05")
# Canonical's -server upload for jammy (Launchpad bug 2129682 quotes its exact Depends): the driver at .2,
# Fabric Manager and NSCQ uploaded separately at .1, depending on the driver's kernel-common at .2.
CANONICAL_DRIVER = "580.95.05"
CANONICAL_RELEASE = "22.04"
CANONICAL_DRIVER_REVISION = f"0ubuntu0.{CANONICAL_RELEASE}.2"
CANONICAL_FM_REVISION = f"0ubuntu0.{CANONICAL_RELEASE}.1"
# The embedded site's pins (inventory/sim/site.yml, tests/ansible/test_standins.py checks they agree).
CUDA_MAJOR = "13"
# Each with the release before it, for the version-bump test: DCGM 4.5.2 with exporter 4.8.1 (NVIDIA/dcgm-exporter's
# tag 4.5.2-4.8.1; Azure AgentBaker pins datacenter-gpu-manager-4-core=1:4.5.2-1), toolkit 1.17.7 and Docker 28.3.2
# (both published releases before 1.17.8 and 28.3.3).
DCGM_RELEASES = (("4.6.0", "4.8.3"), ("4.5.2", "4.8.1"))
TOOLKIT_VERSIONS = ("1.17.8", "1.17.7")
DOCKER_VERSIONS = ("28.3.3", "28.3.2")
DCGM_VERSION, DCGM_EXPORTER_VERSION = DCGM_RELEASES[0]
TOOLKIT_VERSION, DOCKER_VERSION = TOOLKIT_VERSIONS[0], DOCKER_VERSIONS[0]
CONTAINERD_VERSION = "1.7.27"
# DOCA-OFED releases with the MLNX_OFED version `ofed_info -s` prints: the pinned one first, an older one the
# upgrade test installs first.
DOCA_RELEASES = (("2.9.1", "24.10-1.1.4"), ("2.9.0", "24.10-0.7.0"))
# MLNX_OFED (the legacy source): its repository holds one release, named in 4 parts, whose `ofed_info -s` says
# MLNX_OFED_LINUX-<version>: (the MLNX_OFED of DOCA 2.9.1, provision/site/versions.py).
MLNX_OFED_VERSION = "24.10-1.1.4.0"
DOCA_VERSION, OFED_VERSION = DOCA_RELEASES[0]
# Debian 12's own rdma-core (source package rdma-core 44.0-2), for hosts that use no DOCA.
RDMA_CORE_VERSION = "44.0-2"
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


_FM_FILES = (("/usr/bin/nv-fabricmanager", "nv-fabricmanager"),
             ("/lib/systemd/system/nvidia-fabricmanager.service", "nvidia-fabricmanager.service"),
             ("/usr/share/nvidia/nvswitch/fabricmanager.cfg", "fabricmanager.cfg"))


def _driver(upstream: str) -> list[StandIn]:
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
    b = DRIVER_BRANCH
    return [
        *driver,
        StandIn(f"nvidia-fabricmanager-{b}", ver, "cuda", f"NVIDIA Fabric Manager {upstream}", files=_FM_FILES,
                substitutions=subs,
                reference=f"{FM_GUIDE} (installation, Debian-based: nvidia-fabricmanager-<branch>)"),
        StandIn(f"libnvidia-nscq-{b}", ver, "cuda", f"NVSwitch Configuration and Query library {upstream}",
                substitutions=subs, reference=f"{FM_GUIDE} (NSCQ: libnvidia-nscq-<branch>)"),
    ]


UBUNTU_SEARCH = "https://packages.ubuntu.com/search?suite=jammy-updates&keywords="
LP_2129682 = "https://bugs.launchpad.net/ubuntu/+source/fabric-manager-580/+bug/2129682"


def _canonical() -> list[StandIn]:
    """Canonical's signed -server packages of the Ubuntu archive (jammy-updates, restricted; the `ubuntu`
    repository, which only a test host standing in for Ubuntu has among its sources), as
    packages.ubuntu.com lists them: every driver package at V-0ubuntu0.22.04.N depending on its siblings at that
    exact version; Fabric Manager and NSCQ (source fabric-manager-580, libnvidia-nscq-580) at their own
    upload's revision, with an exact Depends on the driver's nvidia-kernel-common-580-server."""
    b, up = DRIVER_BRANCH, CANONICAL_DRIVER
    ver, fm_ver = f"{up}-{CANONICAL_DRIVER_REVISION}", f"{up}-{CANONICAL_FM_REVISION}"
    subs = {"DRIVER_VERSION": up, "VERSION": up}
    common, compute = f"nvidia-kernel-common-{b}-server", f"libnvidia-compute-{b}-server"

    def pkg(name: str, description: str, *depends: str, fm: bool = False, **kw: Any) -> StandIn:
        ref = f"{UBUNTU_SEARCH}{name}" + (f"; exact Depends on {common}: {LP_2129682}" if fm else "")
        return StandIn(name, fm_ver if fm else ver, "ubuntu", description, depends=depends, substitutions=subs,
                       reference=ref, **kw)

    return [
        pkg(f"nvidia-driver-{b}-server-open", f"NVIDIA driver metapackage (open kernel modules) {up}",
            f"nvidia-dkms-{b}-server-open (= {ver})", f"nvidia-utils-{b}-server (= {ver})",
            f"nvidia-compute-utils-{b}-server (= {ver})", f"{common} (= {ver})", f"{compute} (= {ver})"),
        pkg(f"nvidia-dkms-{b}-server-open", f"NVIDIA DKMS package (open kernel module) {up}", "kmod",
            f"{common} (= {ver})", f"nvidia-kernel-source-{b}-server-open (= {ver})",
            postinst="dkms-postinst", prerm="dkms-prerm", modules=KERNEL_MODULES),
        pkg(f"nvidia-kernel-source-{b}-server-open", f"NVIDIA kernel source package (open) {up}"),
        pkg(common, f"Shared files used with the kernel module {up}"),
        pkg(compute, f"NVIDIA libcompute package {up}"),
        pkg(f"nvidia-utils-{b}-server", f"NVIDIA driver support binaries {up}", f"{compute} (= {ver})",
            files=(("/usr/bin/nvidia-smi", "nvidia-smi"),
                   ("/usr/share/nvidia-standin/nvidia-smi.table", "nvidia-smi.table"))),
        pkg(f"nvidia-compute-utils-{b}-server", f"NVIDIA compute utilities {up}", f"{compute} (= {ver})",
            files=(("/usr/bin/nvidia-persistenced", "nvidia-persistenced"),
                   ("/lib/systemd/system/nvidia-persistenced.service", "nvidia-persistenced.service"))),
        pkg(f"nvidia-fabricmanager-{b}", f"Fabric Manager for NVSwitch based systems {up}", f"{common} (= {ver})",
            fm=True, files=_FM_FILES),
        pkg(f"libnvidia-nscq-{b}", f"NVSwitch Configuration and Query library {up}", f"{common} (= {ver})", fm=True),
    ]


DCGM_GUIDE = "https://docs.nvidia.com/datacenter/dcgm/latest/installation.html"
TOOLKIT_GUIDE = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
DOCKER_REPO = "https://download.docker.com/linux/debian/dists/bookworm/stable/"
DOCKER_GUIDE = "https://docs.docker.com/engine/install/debian/ (specific version: 5:28.3.3-1~debian.12~bookworm)"
DOCKER_REF = f"{DOCKER_GUIDE}; {DOCKER_REPO}"
DOCA_REPO = "https://linux.mellanox.com/public/repo/doca/"
MLNX_OFED_REPO = "https://linux.mellanox.com/public/repo/mlnx_ofed/"
DEBIAN = "https://packages.debian.org/bookworm/"


def _dcgm(version: str, exporter_version: str) -> list[StandIn]:
    """DCGM 4 in NVIDIA's CUDA repository: epoch 1, the CUDA-major package for the site's CUDA (13)."""
    dcgm, subs = f"1:{version}-1", {"VERSION": version}
    exporter = f"{version}-{exporter_version}"
    ref = f"{DCGM_GUIDE} (datacenter-gpu-manager-4-cuda${{CUDA_MAJOR}}); index {CUDA_DEBIAN12}"
    return [
        StandIn("datacenter-gpu-manager-4-core", dcgm, "cuda", "NVIDIA DCGM 4 core (host engine, dcgmi)",
                files=(("/usr/bin/dcgmi", "dcgmi"), ("/usr/bin/nv-hostengine", "nv-hostengine"),
                       ("/lib/systemd/system/nvidia-dcgm.service", "nvidia-dcgm.service")), substitutions=subs,
                reference=ref),
        StandIn(f"datacenter-gpu-manager-4-cuda{CUDA_MAJOR}", dcgm, "cuda", f"NVIDIA DCGM 4 CUDA {CUDA_MAJOR}",
                depends=(f"datacenter-gpu-manager-4-core (= {dcgm})",), substitutions=subs, reference=ref),
        StandIn("datacenter-gpu-manager-exporter", f"{exporter}-1", "cuda", "NVIDIA DCGM exporter",
                depends=(f"datacenter-gpu-manager-4-core (>= {dcgm})",),
                files=(("/usr/bin/dcgm-exporter", "dcgm-exporter"),
                       ("/etc/dcgm-exporter/default-counters.csv", "default-counters.csv")),
                substitutions={"VERSION": exporter},
                reference=f"https://docs.nvidia.com/datacenter/dcgm/latest/release-notes/dcgm-exporter.html "
                          f"(<dcgm>-<exporter> tags); index {CUDA_DEBIAN12}"),
    ]


def _toolkit(version: str) -> list[StandIn]:
    """The container toolkit's four packages at one version (the install guide pins all four)."""
    tk, ref = f"{version}-1", f"{TOOLKIT_GUIDE} (NVIDIA_CONTAINER_TOOLKIT_VERSION={version}-1)"
    return [
        StandIn("nvidia-container-toolkit", tk, "toolkit", "NVIDIA container runtime hook",
                depends=(f"nvidia-container-toolkit-base (= {tk})", f"libnvidia-container-tools (>= {tk})"),
                reference=ref),
        StandIn("nvidia-container-toolkit-base", tk, "toolkit", "NVIDIA Container Toolkit Base",
                files=(("/usr/bin/nvidia-ctk", "nvidia-ctk"),
                       ("/usr/bin/nvidia-container-runtime", "nvidia-container-runtime")),
                substitutions={"VERSION": version}, reference=ref),
        StandIn("libnvidia-container-tools", tk, "toolkit", "NVIDIA container runtime library (command-line tools)",
                depends=(f"libnvidia-container1 (>= {tk})",), reference=ref),
        StandIn("libnvidia-container1", tk, "toolkit", "NVIDIA container runtime library", reference=ref),
    ]


def _docker(upstream: str) -> list[StandIn]:
    """Docker's engine and CLI at its epoch-5 per-distribution version string."""
    docker = f"5:{upstream}-1~debian.12~bookworm"
    return [
        StandIn("docker-ce", docker, "docker", "Docker engine",
                depends=(f"docker-ce-cli (= {docker})", f"containerd.io (>= {CONTAINERD_VERSION})"),
                files=(("/usr/bin/dockerd", "dockerd"), ("/lib/systemd/system/docker.service", "docker.service")),
                substitutions={"UPSTREAM": upstream}, reference=DOCKER_REF),
        StandIn("docker-ce-cli", docker, "docker", "Docker CLI",
                files=(("/usr/bin/docker", "docker"),), substitutions={"UPSTREAM": upstream},
                reference=DOCKER_REF),
    ]


def _rdma() -> list[StandIn]:
    """DOCA-OFED releases (the DOCA repository, one directory per release), MLNX_OFED's meta-package (its
    repository) and Debian 12's own rdma-core."""
    files = (("/usr/bin/ofed_info", "ofed_info"), ("/lib/systemd/system/openibd.service", "openibd.service"))
    out = [StandIn("doca-ofed", f"{doca}-1", "doca", f"DOCA-OFED {doca} (OFED {ofed})", files=files,
                   substitutions={"VERSION": f"{doca}-1", "OFED": ofed, "PREFIX": "OFED-internal",
                                  "META": "doca-ofed", "ARCH": "amd64"},
                   reference=f"{DOCA_REPO}{doca}/debian12.5/x86_64/")
           for doca, ofed in DOCA_RELEASES]
    # mlnx-ofed-all is architecture "all" (mlnx-ofed-all_24.10-1.1.4.0_all.deb); the stand-in builds as amd64.
    out.append(StandIn("mlnx-ofed-all", MLNX_OFED_VERSION, "mlnx", f"MLNX_OFED {MLNX_OFED_VERSION} (all packages)",
                       files=files, substitutions={"VERSION": MLNX_OFED_VERSION, "OFED": MLNX_OFED_VERSION,
                                                   "PREFIX": "MLNX_OFED_LINUX", "META": "mlnx-ofed-all",
                                                   "ARCH": "all"},
                       reference=f"{MLNX_OFED_REPO}latest/ubuntu24.04/ (mlnx-ofed-all_{MLNX_OFED_VERSION}_all.deb)"))
    debian = {"rdma-core": (), "ibverbs-providers": (), "ibverbs-utils": (),
              "infiniband-diags": (f"libibmad5 (>= {RDMA_CORE_VERSION})",), "libibmad5": ()}
    out += [StandIn(name, RDMA_CORE_VERSION, "distro", f"Debian 12 {name} (rdma-core {RDMA_CORE_VERSION})",
                    depends=deps, reference=f"{DEBIAN}{name}") for name, deps in debian.items()]
    return out


def stand_ins() -> list[StandIn]:
    out: list[StandIn] = []
    for upstream in DRIVER_VERSIONS:
        out += _driver(upstream)
    for dcgm, exporter in DCGM_RELEASES:
        out += _dcgm(dcgm, exporter)
    for toolkit in TOOLKIT_VERSIONS:
        out += _toolkit(toolkit)
    for docker in DOCKER_VERSIONS:
        out += _docker(docker)
    out += [*_canonical(), *_rdma(),
            StandIn("containerd.io", f"{CONTAINERD_VERSION}-1", "docker", "containerd runtime",
                    files=(("/usr/bin/containerd", "containerd"),
                           ("/lib/systemd/system/containerd.service", "containerd.service")),
                    substitutions={"UPSTREAM": CONTAINERD_VERSION}, reference=DOCKER_REF),
            # The test hosts run the controller's kernel (chroots): the archive's headers package for it.
            StandIn(f"linux-headers-{KERNEL}", f"{KERNEL}-1", "distro", f"Linux kernel headers for {KERNEL}",
                    reference="https://packages.ubuntu.com/search?keywords=linux-headers"),
            # Debian 12's zfs (source zfs-linux, contrib): DKMS-built module + tools (roles/zfs_raidz vars/main.yml).
            StandIn("zfs-dkms", ZFS_DEBIAN12, "distro", "OpenZFS filesystem kernel modules for Linux",
                    reference="https://packages.debian.org/bookworm/zfs-dkms"),
            StandIn("zfsutils-linux", ZFS_DEBIAN12, "distro", "command-line tools to manage OpenZFS filesystems",
                    files=(("/usr/sbin/zpool", "zpool"), ("/usr/sbin/zfs", "zfs")),
                    substitutions={"VERSION": ZFS_DEBIAN12.split("+")[0]},  # zfs version: zfs-2.1.11-1
                    reference="https://packages.debian.org/bookworm/zfsutils-linux")]
    return out
