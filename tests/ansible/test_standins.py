"""The stand-in repository of the test hosts copies the real sources' packaging, and says which page it copies.

Each stand-in names its reference (listed by the first test). The driver stand-ins are exactly what the
nvidia_driver role asks NVIDIA's CUDA repository for debian12 for, at the version string that source uses, so
a role asking for a name or version that source does not publish fails on the test hosts as apt fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from sim.testhosts.standins import DRIVER_BRANCH, DRIVER_VERSIONS, StandIn, stand_ins

REPO = Path(__file__).resolve().parents[2]
# Packages the stand-ins depend on that Debian itself provides (not stand-ins).
DEBIAN_BASE = {"kmod"}


def _packagings(version: str) -> dict[str, dict[str, Any]]:
    """nvidia_driver's table of package names and version strings, rendered for branch/version."""
    table = yaml.safe_load((REPO / "roles/nvidia_driver/vars/main.yml").read_text())["nvidia_driver_packagings"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    values = {"nvidia_driver_b": DRIVER_BRANCH, "nvidia_driver_v": version, "nvidia_driver_ubuntu_release": "24.04"}

    def render(node: Any) -> Any:
        if isinstance(node, str):
            return env.from_string(node).render(values)
        if isinstance(node, list):
            return [render(n) for n in node]
        return {k: render(v) for k, v in node.items()} if isinstance(node, dict) else node

    return {key: render(entry) for key, entry in table.items()}


def test_every_stand_in_names_the_page_it_copies_its_packaging_from() -> None:
    listing = {f"{p.name} {p.version}": p.reference for p in stand_ins()}
    assert all(ref.startswith("https://") for ref in listing.values()), listing
    assert "docs.nvidia.com/datacenter/tesla/driver-installation-guide" in listing["nvidia-driver-cuda 580.159.04-1"]
    assert listing["zfsutils-linux 2.1.11-1+deb12u1"] == "https://packages.debian.org/bookworm/zfsutils-linux"
    assert listing["zfs-dkms 2.1.11-1+deb12u1"] == "https://packages.debian.org/bookworm/zfs-dkms"


@pytest.mark.parametrize("upstream", DRIVER_VERSIONS)
def test_the_cuda_debian12_stand_ins_are_what_the_role_asks_that_source_for(upstream: str) -> None:
    packaging = _packagings(upstream)["cuda-debian12"]
    have = {(p.name, p.version) for p in stand_ins()}
    wanted = {(name, packaging["version"]) for name in packaging["packages"]}
    assert wanted <= have, sorted(wanted - have)
    assert (packaging["utils"], packaging["version"]) in have
    if upstream == DRIVER_VERSIONS[0]:  # Fabric Manager is published for the pinned version
        assert {(n, packaging["fabricmanager_version"]) for n in packaging["fabricmanager"]} <= have


def test_no_stand_in_carries_a_name_the_source_does_not_publish() -> None:
    # The combination the issue found invented (Canonical's -server names at a CUDA-repository revision) is gone.
    for pkg in stand_ins():
        assert not (pkg.repo == "cuda" and "-server" in pkg.name), pkg
        assert not (pkg.repo == "cuda" and pkg.name.startswith("nvidia-") and pkg.version.endswith("0ubuntu1")), pkg


def _satisfied(clause: str, packages: list[StandIn]) -> bool:
    for alternative in clause.split("|"):
        name, _, rest = alternative.strip().partition(" ")
        want = rest.strip("()").removeprefix("= ").strip() if rest else None
        if name in DEBIAN_BASE or any(p.name == name and (want is None or p.version == want) for p in packages):
            return True
    return False


def test_every_stand_in_dependency_is_satisfiable_inside_the_repository() -> None:
    packages = stand_ins()
    broken = [(p.name, clause) for p in packages for clause in p.depends if not _satisfied(clause, packages)]
    assert broken == []
