"""Both driver package sources on fresh test hosts, a site version bump, and apt's own refusals (real SSH).

Three Debian 12 test hosts of their own run the packaging roles (tests/ansible/playbooks/gpu_packaging.yml: ofed,
nvidia_driver, nvidia_fabricmanager, container_runtime, dcgm): gpu-r1-01 takes NVIDIA's CUDA repository (debian12 packaging) with an
older DOCA-OFED installed by hand before the first run; gpu-r1-02 takes Canonical's -server packaging (its
stand-ins in an archive repository of its own, named as on Ubuntu 22.04) and Debian's own rdma-core; gpu-r1-03
takes the CUDA repository too, so that a driver bump has two hosts to move one batch after the other, and the
legacy MLNX_OFED source (its repository's mlnx-ofed-all). The order
of the tests is the story: first run configures, second changes nothing, a bump of the site's driver version
rolled out one host per batch (the site's rollout.batches [1]) upgrades driver and Fabric Manager in one
transaction with the (recorded) reboot on each CUDA host, the first host's reboot before the next batch's
upgrade, and DCGM with its exporter, Docker and the container toolkit (bumped in the same site edit) on every host, the next run changes nothing, and a name or a version the source does not publish fails with apt's own
messages on both sources.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sim.testhosts.proc import run
from sim.testhosts.repo import KEY_NAME
from sim.testhosts.standins import (
    CANONICAL_DRIVER,
    DCGM_RELEASES,
    DOCA_RELEASES,
    DOCKER_VERSIONS,
    DRIVER_VERSIONS,
    MLNX_OFED_VERSION,
    RDMA_CORE_VERSION,
    TOOLKIT_VERSIONS,
)
from tests.ansible.conftest import REPO, run_playbook, start_own_test_hosts

pytestmark = pytest.mark.slow

PLAYBOOK = REPO / "tests/ansible/playbooks/gpu_packaging.yml"
CUDA, UBUNTU, CUDA2 = "gpu-r1-01", "gpu-r1-02", "gpu-r1-03"
HOSTS = (CUDA, UBUNTU, CUDA2)
NEW, OLD = DRIVER_VERSIONS
CUDA_SET = ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced",
            "nvidia-fabricmanager-580", "libnvidia-nscq-580")
# Test hosts #101-#103 (127.0.1.101-103): not the package lab's (#1-#4), so this module needs no place in the
# lab's xdist group and may run beside it, on either worker.
ADDRESS_OFFSET = 100
_runs: dict[str, Any] = {}


def _host_vars(lab: Any, host: str, values: dict[str, object]) -> None:
    (lab.run_dir / "inventory" / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(values, sort_keys=True))


def _userspace(release: int) -> dict[str, str]:
    """The site's DCGM, dcgm-exporter, container toolkit and Docker versions: 0 the stand-ins' newest, 1 the older."""
    (dcgm, exporter), toolkit, docker = DCGM_RELEASES[release], TOOLKIT_VERSIONS[release], DOCKER_VERSIONS[release]
    return {"dcgm": dcgm, "dcgm_exporter": exporter, "container_toolkit": toolkit, "docker": docker}


def userspace_packages(release: int) -> dict[str, str]:
    """Those versions as the package versions apt installs on these (Debian 12) hosts."""
    v = _userspace(release)
    dcgm, toolkit, docker = f"1:{v['dcgm']}-1", f"{v['container_toolkit']}-1", f"5:{v['docker']}-1~debian.12~bookworm"
    return {"datacenter-gpu-manager-4-core": dcgm, "datacenter-gpu-manager-4-cuda13": dcgm,
            "datacenter-gpu-manager-exporter": f"{v['dcgm']}-{v['dcgm_exporter']}-1",
            "nvidia-container-toolkit": toolkit, "nvidia-container-toolkit-base": toolkit,
            "libnvidia-container-tools": toolkit, "libnvidia-container1": toolkit,
            "docker-ce": docker, "docker-ce-cli": docker}


def _set_site_driver(lab: Any, version: str, batches: list[int | str] | None = None) -> None:
    """The site's driver version (host class versions.gpu_driver), with the DCGM, toolkit and Docker release of the
    same age, and its rollout batches (none: all hosts at once), as an operator edits them."""
    doc = yaml.safe_load(lab.site_file.read_text())
    for cls in doc["host_classes"].values():
        cls["versions"]["gpu_driver"] = version
        cls["versions"].update(_userspace(0 if version == NEW else 1))
    doc.pop("rollout", None)
    if batches:
        doc["rollout"] = {"batches": batches}
    lab.site_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _chroot(lab: Any, host: str, *argv: str) -> str:
    return run(["chroot", str(lab.host(host).root), *argv], timeout=300)


def _install_old_doca(lab: Any, host: str) -> None:
    """DOCA-OFED of the previous release installed by hand, as on a host set up before the site's pin."""
    root = lab.host(host).root
    source = root / "etc/apt/sources.list.d/old-doca.sources"
    source.write_text(f"Types: deb\nURIs: {lab.repo_url}/doca/\nSuites: ./\n"
                      "Signed-By: /etc/apt/keyrings/bringup-testhost-distro.asc\n")
    try:
        _chroot(lab, host, "apt-get", "-q", "update")
        _chroot(lab, host, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
                f"doca-ofed={DOCA_RELEASES[1][0]}-1")
    finally:
        source.unlink()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("packaging")
    started: Any = start_own_test_hosts(run_dir, len(HOSTS), ADDRESS_OFFSET)
    try:
        _set_site_driver(started, OLD)
        # The controller's copies of the vendor keys, this lab's own (the first run downloads each one).
        (started.run_dir / "inventory" / "group_vars" / "all" / "70-vendor-keys.yml").write_text(
            yaml.safe_dump({"vendor_repo_controller_key_dir": str(run_dir / "vendor-keys")}))
        _host_vars(started, UBUNTU, {"testhost_as_ubuntu": True, "nvidia_driver_source": "ubuntu",
                                     "nvidia_driver_site_version": CANONICAL_DRIVER, "ofed_source": "inbox"})
        _host_vars(started, CUDA2, {"ofed_source": "mlnx"})
        _install_old_doca(started, CUDA)
        # gpu-r1-02 stands for an Ubuntu host: Canonical's archive among its sources (the `ubuntu` stand-ins).
        (started.host(UBUNTU).root / "etc/apt/sources.list.d/testhost-ubuntu-archive.sources").write_text(
            f"Types: deb\nURIs: {started.repo_url}/ubuntu/\nSuites: ./\n"
            "Signed-By: /etc/apt/keyrings/bringup-testhost-distro.asc\n")
        yield started
    finally:
        assert lab_mod.down(run_dir) == []


def playbook(lab: Any, name: str) -> Any:
    """The named run of the story, run once (the tests that need it share it)."""
    order = ["first", "second", "bump", "after_bump"]
    for step in order[: order.index(name) + 1]:
        if step not in _runs:
            if step == "bump":
                _set_site_driver(lab, NEW, batches=[1])
            elif step == "after_bump":
                _set_site_driver(lab, NEW)
            _runs[step] = run_playbook(lab.inventory, PLAYBOOK, timeout=600)
    return _runs[name]


def changes(output: str) -> list[tuple[str, str]]:
    """Each change as (`TASK [role : name]`, host), in the order the run printed them."""
    task, found = "", []
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line.split("]", 1)[0] + "]"
        elif line.startswith("changed: ["):
            found.append((task, line[len("changed: ["):].split("]", 1)[0].split(" -> ")[0]))
    return found


def changed_tasks(output: str) -> list[str]:
    """The tasks that changed something, as `TASK [role : name]`, in the order they first did."""
    return list(dict.fromkeys(task for task, _ in changes(output)))


def packages(lab: Any, host: str) -> dict[str, str]:
    out = _chroot(lab, host, "dpkg-query", "--show", "--showformat=${Package}\t${Version}\t${Status}\n")
    return {row[0]: row[1] for row in (line.split("\t") for line in out.splitlines()) if row[2].endswith(" installed")}


def holds(lab: Any, host: str) -> set[str]:
    return set(_chroot(lab, host, "apt-mark", "showhold").split())


def cuda_set_locked_at(lab: Any, version: str, host: str = CUDA) -> dict[str, str]:
    """Driver, Fabric Manager and NSCQ of a CUDA host at `version`, held and pinned; its installed packages."""
    have = packages(lab, host)
    assert {name: have.get(name) for name in CUDA_SET} == dict.fromkeys(CUDA_SET, version)
    assert set(CUDA_SET) <= holds(lab, host)
    pins = (lab.host(host).root / "etc/apt/preferences.d/bringup-nvidia-driver.pref").read_text()
    assert all(f"Package: {name}\nPin: version {version}\nPin-Priority: 1001" in pins for name in CUDA_SET), pins
    return have


def test_first_run_installs_each_source_s_packaging_locked_and_the_site_s_doca(lab: Any) -> None:
    first = playbook(lab, "first")
    assert first.rc == 0, first.output[-4000:]
    have = cuda_set_locked_at(lab, f"{OLD}-1")
    # The older DOCA-OFED installed by hand was upgraded to the site's release.
    assert have["doca-ofed"] == f"{DOCA_RELEASES[0][0]}-1"
    # The MLNX_OFED host: the one release its repository holds, from that repository.
    have = cuda_set_locked_at(lab, f"{OLD}-1", CUDA2)
    assert have["mlnx-ofed-all"] == MLNX_OFED_VERSION and "doca-ofed" not in have
    assert _chroot(lab, CUDA2, "ofed_info", "-s").strip() == f"MLNX_OFED_LINUX-{MLNX_OFED_VERSION}:"
    assert "/mlnx/" in (lab.host(CUDA2).root / "etc/apt/sources.list.d/nvidia-mlnx.sources").read_text()
    assert _chroot(lab, CUDA, "ofed_info", "-s").strip() == f"OFED-internal-{DOCA_RELEASES[0][1]}:"
    # Canonical's packaging: the driver's upload at .2, Fabric Manager's at .1 depending on its kernel-common.
    have = packages(lab, UBUNTU)
    driver = f"{CANONICAL_DRIVER}-0ubuntu0.22.04.2"
    assert have["nvidia-driver-580-server-open"] == driver and have["nvidia-kernel-common-580-server"] == driver
    assert have["nvidia-fabricmanager-580"] == f"{CANONICAL_DRIVER}-0ubuntu0.22.04.1"
    assert {"nvidia-driver-580-server-open", "nvidia-fabricmanager-580", "libnvidia-nscq-580"} <= holds(lab, UBUNTU)
    assert have["rdma-core"] == RDMA_CORE_VERSION and "doca-ofed" not in have
    # Each vendor key came from the controller, downloaded once for the three hosts (the repository server's log),
    # and is installed on every host that uses its repository.
    keys = sorted((lab.run_dir / "vendor-keys").glob("*.asc"))
    fetched = (lab.run_dir / "repo-http.log").read_text().count(f"GET /keys/{KEY_NAME} ")
    assert len(keys) == 5 and fetched == len(keys), (keys, fetched)  # CUDA, DOCA, MLNX_OFED, Docker, toolkit
    for host in HOSTS:
        assert {"nvidia-cuda.asc", "docker.asc", "nvidia-container-toolkit.asc"} <= {
            p.name for p in (lab.host(host).root / "etc/apt/keyrings").iterdir()}, host
    # DCGM, its exporter, Docker and the container toolkit at the site's (older) releases, held.
    for host in HOSTS:
        have = packages(lab, host)
        assert {name: have.get(name) for name in userspace_packages(1)} == userspace_packages(1), host
        assert set(userspace_packages(1)) <= holds(lab, host)


def _changes_nothing(lab: Any, name: str) -> None:
    run = playbook(lab, name)
    assert run.rc == 0, run.output[-4000:]
    for host in HOSTS:
        assert run.recap[host]["changed"] == 0, (host, changed_tasks(run.output))


def test_second_run_changes_nothing_on_either_source(lab: Any) -> None:
    _changes_nothing(lab, "second")


INSTALL = "TASK [pinned_packages : Install the set in one apt transaction]"
REBOOT = "TASK [nvidia_driver : Record the upgrade reboot on a test host]"


def test_a_site_version_bump_upgrades_driver_and_fabric_manager_together_then_reboots_batch_by_batch(
        lab: Any) -> None:
    bump = playbook(lab, "bump")
    assert bump.rc == 0, bump.output[-4000:]
    for host in (CUDA, CUDA2):
        cuda_set_locked_at(lab, f"{NEW}-1", host)
        # One apt transaction moved all six (apt's own history of the host).
        history = (lab.host(host).root / "var/log/apt/history.log").read_text().split("Start-Date:")
        upgraded = [line for entry in history for line in entry.splitlines()
                    if line.startswith("Upgrade: ") and "nvidia-driver-cuda:amd64" in line][-1]
        assert all(f"{name}:amd64 ({OLD}-1, {NEW}-1)" in upgraded for name in CUDA_SET), upgraded
        # ... and then the reboot the new driver needs (recorded: a chroot cannot reboot), after the packages.
        reboots = (lab.host(host).root / "var/lib/bringup/simulated-reboots").read_text().splitlines()
        assert reboots == [f"nvidia driver {OLD}-1 -> {NEW}-1"]
    # DCGM, the exporter, Docker and the container toolkit moved to the site's new releases on every host, held
    # and pinned at them.
    for host in HOSTS:
        have = packages(lab, host)
        assert {name: have.get(name) for name in userspace_packages(0)} == userspace_packages(0), host
        assert set(userspace_packages(0)) <= holds(lab, host)
        pins = (lab.host(host).root / "etc/apt/preferences.d/bringup-dcgm.pref").read_text()
        assert f"Package: datacenter-gpu-manager-4-core\nPin: version {userspace_packages(0)['datacenter-gpu-manager-4-core']}\n" in pins
    # rollout.batches [1]: a play per host, each host through its upgrades (driver set and its reboot, then Docker
    # with the toolkit, then DCGM) before the next one starts; the Ubuntu host's driver did not change.
    assert bump.output.count("PLAY [The RDMA stack and the driver stack") == len(HOSTS), bump.output[-4000:]
    moves = [change for change in changes(bump.output) if change[0] in (INSTALL, REBOOT)]
    assert moves == [(INSTALL, CUDA), (REBOOT, CUDA), (INSTALL, CUDA), (INSTALL, CUDA),
                     (INSTALL, UBUNTU), (INSTALL, UBUNTU),
                     (INSTALL, CUDA2), (REBOOT, CUDA2), (INSTALL, CUDA2), (INSTALL, CUDA2)], moves


def test_the_run_after_the_bump_changes_nothing(lab: Any) -> None:
    _changes_nothing(lab, "after_bump")


def test_a_name_or_version_the_source_does_not_publish_fails_with_apt_s_messages_on_both_sources(
        lab: Any) -> None:
    assert playbook(lab, "after_bump").rc == 0
    # On each source, a name it does not publish beside one it does, asked at a version it never published:
    # Canonical's -server name and a driver NVIDIA never released of the CUDA repository (the combination issue
    # 17 found); of the archive, a -server name Canonical does not use (its utils are not "-open") and a driver
    # version Canonical never uploaded. (That host has the CUDA repository too, for DCGM, so a CUDA name would be
    # found there.)
    _host_vars(lab, CUDA, {"nvidia_driver_packages": ["nvidia-driver-580-server-open", "nvidia-smi"],
                           "nvidia_driver_site_version": "580.999.99"})
    _host_vars(lab, UBUNTU, {"testhost_as_ubuntu": True, "nvidia_driver_source": "ubuntu",
                             "nvidia_driver_site_version": NEW, "ofed_source": "inbox",
                             "nvidia_driver_packages": ["nvidia-utils-580-server-open", "nvidia-driver-580-server-open"]})
    wrong = run_playbook(lab.inventory, PLAYBOOK, timeout=600)
    assert wrong.rc != 0 and wrong.recap[CUDA]["failed"] == 1 and wrong.recap[UBUNTU]["failed"] == 1
    said = " ".join(wrong.output.replace("''", "'").split())  # the failure messages, unwrapped
    assert "E: Unable to locate package nvidia-driver-580-server-open" in said
    assert "E: Version '580.999.99-1' for 'nvidia-smi' was not found" in said
    assert "E: Unable to locate package nvidia-utils-580-server-open" in said
    assert f"E: Version '{NEW}-0ubuntu0.22.04.*' for 'nvidia-driver-580-server-open' was not found" in said
    # Nothing moved: the pins and holds of the last good run are still there.
    cuda_set_locked_at(lab, f"{NEW}-1")
