"""The stand-in repository of the test hosts copies the real sources' packaging, and says which page it copies.

Each stand-in names its reference (listed by the first test). The driver stand-ins are exactly what the
nvidia_driver role asks each source for: NVIDIA's CUDA repository for debian12 and Canonical's jammy -server
packaging (in the test hosts' archive repository), at the version strings those sources use and with their
Depends, so a role asking for a name or version a source does not publish fails on the test hosts as apt fails.
The other stand-ins carry the versions the embedded site pins.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from provision.site.versions import DOCA_MLNX_OFED, Versions, ofed_info_form
from sim.testhosts import standins as si
from sim.testhosts.standins import DRIVER_BRANCH, DRIVER_VERSIONS, StandIn, stand_ins

REPO = Path(__file__).resolve().parents[2]
# Packages the stand-ins depend on that Debian itself provides (not stand-ins).
DEBIAN_BASE = {"kmod"}


def _packagings(version: str, release: str = "24.04") -> dict[str, dict[str, Any]]:
    """nvidia_driver's table of package names and version strings, rendered for branch/version."""
    table = yaml.safe_load((REPO / "roles/nvidia_driver/vars/main.yml").read_text())["nvidia_driver_packagings"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    values = {"nvidia_driver_b": DRIVER_BRANCH, "nvidia_driver_v": version, "nvidia_driver_ubuntu_release": release}

    def render(node: Any) -> Any:
        if isinstance(node, str):
            return env.from_string(node).render(values)
        if isinstance(node, list):
            return [render(n) for n in node]
        return {k: render(v) for k, v in node.items()} if isinstance(node, dict) else node

    return {key: render(entry) for key, entry in table.items()}


def test_every_stand_in_names_the_page_it_copies_its_packaging_from() -> None:
    listing = {f"{p.repo}/{p.name} {p.version}": p.reference for p in stand_ins()}
    print("\n".join(f"{k}: {v}" for k, v in sorted(listing.items())))  # the list, with -s
    assert all(ref.startswith("https://") for ref in listing.values()), listing
    assert "docs.nvidia.com/datacenter/tesla/driver-installation-guide" in listing["cuda/nvidia-driver-cuda 580.159.04-1"]
    assert "bugs.launchpad.net" in listing["ubuntu/nvidia-fabricmanager-580 580.95.05-0ubuntu0.22.04.1"]
    assert "install-guide" in listing["toolkit/libnvidia-container1 1.17.8-1"]
    assert "packages.debian.org/bookworm/rdma-core" in listing["distro/rdma-core 44.0-2"]


@pytest.mark.parametrize("upstream", DRIVER_VERSIONS)
def test_the_cuda_debian12_stand_ins_are_what_the_role_asks_that_source_for(upstream: str) -> None:
    packaging = _packagings(upstream)["cuda-debian12"]
    have = {(p.name, p.version) for p in stand_ins()}
    wanted = {(name, packaging["version"]) for name in packaging["packages"]}
    assert wanted <= have, sorted(wanted - have)
    assert (packaging["utils"], packaging["version"]) in have
    assert {(n, packaging["fabricmanager_version"]) for n in packaging["fabricmanager"]} <= have


def _glob(version: str, have: str) -> bool:
    return have == version or (version.endswith("*") and have.startswith(version[:-1]))


def test_the_canonical_stand_ins_are_what_the_role_asks_the_ubuntu_source_for() -> None:
    packaging = _packagings(si.CANONICAL_DRIVER, si.CANONICAL_RELEASE)["ubuntu-ubuntu2204"]
    archive = [p for p in stand_ins() if p.repo == "ubuntu"]
    for name in packaging["packages"]:
        assert any(p.name == name and _glob(packaging["version"], p.version) for p in archive), name
    for name in packaging["fabricmanager"]:
        found = [p for p in archive if p.name == name and _glob(packaging["fabricmanager_version"], p.version)]
        # Fabric Manager's own upload (.1) depends on the driver upload's (.2) exact kernel-common
        assert found and found[0].depends == (f"nvidia-kernel-common-580-server (= {si.CANONICAL_DRIVER}-"
                                              f"{si.CANONICAL_DRIVER_REVISION})",), found
    assert not any(_glob(_packagings("580.159.04", "22.04")["ubuntu-ubuntu2204"]["version"], p.version)
                   for p in archive), "a Canonical version the archive stand-in should not have"


def test_the_stand_ins_carry_the_versions_the_embedded_site_pins() -> None:
    site = yaml.safe_load((REPO / "inventory/sim/site.yml").read_text())
    versions = Versions(**site["host_classes"]["hgx-h200-sim"]["versions"])
    assert (versions.dcgm, versions.dcgm_exporter) == (si.DCGM_VERSION, si.DCGM_EXPORTER_VERSION)
    assert str(versions.cuda).split(".")[0] == si.CUDA_MAJOR
    assert (versions.container_toolkit, versions.docker, versions.containerd) == (
        si.TOOLKIT_VERSION, si.DOCKER_VERSION, si.CONTAINERD_VERSION)
    assert (versions.doca_ofed, versions.gpu_driver) == (si.DOCA_VERSION, DRIVER_VERSIONS[0])
    # DOCA-OFED's ofed_info prints the MLNX_OFED version NVIDIA's release notes pair with the release.
    for doca, ofed in si.DOCA_RELEASES:
        assert ofed_info_form(DOCA_MLNX_OFED[doca]) == ofed
    names = {p.name for p in stand_ins()}
    assert f"datacenter-gpu-manager-4-cuda{si.CUDA_MAJOR}" in names and "datacenter-gpu-manager-4-cuda12" not in names


def test_no_stand_in_carries_a_name_the_source_does_not_publish() -> None:
    # The combination the issue found invented (Canonical's -server names at a CUDA-repository revision) is gone,
    # and a Debian host's archive (distro) has none of Canonical's -server packages either.
    for pkg in stand_ins():
        assert not (pkg.repo in ("cuda", "distro") and "-server" in pkg.name), pkg
        assert not (pkg.repo == "cuda" and pkg.name.startswith("nvidia-") and pkg.version.endswith("0ubuntu1")), pkg


def _version_ok(have: str, op: str, want: str) -> bool:
    ops = {"=": "eq", ">=": "ge", "<<": "lt", "<=": "le", ">>": "gt"}
    return subprocess.run(["dpkg", "--compare-versions", have, ops[op], want], check=False).returncode == 0


def _satisfied(clause: str, packages: list[StandIn]) -> bool:
    for alternative in clause.split("|"):
        name, _, rest = alternative.strip().partition(" ")
        op, _, want = rest.strip("()").partition(" ")
        if name in DEBIAN_BASE or any(p.name == name and (not rest or _version_ok(p.version, op, want))
                                      for p in packages):
            return True
    return False


def test_every_stand_in_dependency_is_satisfiable_inside_the_repository() -> None:
    packages = stand_ins()
    broken = [(p.name, clause) for p in packages for clause in p.depends if not _satisfied(clause, packages)]
    assert broken == []


def _debian_index(path: Path) -> dict[str, dict[str, str]]:
    """Package -> its fields, from a Debian Packages index (stanzas separated by blank lines)."""
    out: dict[str, dict[str, str]] = {}
    for stanza in path.read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith("#"))
        if "Package" in fields:
            out[fields["Package"]] = fields
    return out


def test_the_debian_stand_ins_carry_the_real_bookworm_archive_versions_and_dependency_names() -> None:
    # The excerpt was cut from deb.debian.org's bookworm main and contrib indexes (its header says when).
    real = _debian_index(REPO / "tests/fixtures/debian/bookworm-Packages-excerpt.txt")
    debian = [p for p in stand_ins() if p.repo == "distro" and p.name in real]
    assert {p.name for p in debian} >= {"zfs-dkms", "zfsutils-linux", "rdma-core", "infiniband-diags", "libibmad5"}
    assert [(p.name, p.version) for p in debian if p.version != real[p.name]["Version"]] == []
    for pkg in debian:
        names = {c.strip().split(" ")[0] for c in real[pkg.name].get("Depends", "").replace("|", ",").split(",")}
        assert {clause.split(" ")[0] for clause in pkg.depends} <= names, pkg.name
    assert real["zfsutils-linux"]["Source"] == real["zfs-dkms"]["Source"] == "zfs-linux"
