"""`ansible-playbook playbooks/site.yml` against four real SSH test hosts (Debian 12 chroots).

The order of the tests is the order of the story: a first run configures every host and records it,
testinfra checks each role's end state over SSH, a second run changes nothing, then faults are injected
and each faulty host fails with what to fix while the others finish, and the state store says so.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from sim.testhosts import faults
from tests.ansible.conftest import REPO, enabled, run_playbook, ssh, state_of

pytestmark = pytest.mark.slow

# As users type it: the top-level site.yml (importing playbooks/site.yml).
SITE = REPO / "site.yml"
# NVIDIA's CUDA repository for debian12 (the test hosts are Debian 12): unversioned names, "-1" revision.
DRIVER = "580.159.04-1"
HOSTS = ("gpu-r1-01", "gpu-r1-02", "gpu-r1-03", "gpu-r1-04")
_runs: dict[str, Any] = {}


def fresh_check_run(lab: Any) -> Any:
    """`--check --diff` on the fresh hosts, before anything configured them."""
    if "fresh_check" not in _runs:
        _runs["fresh_check"] = run_playbook(lab.inventory, SITE, "--check", "--diff")
    return _runs["fresh_check"]


def first_run(lab: Any) -> Any:
    fresh_check_run(lab)
    if "first" not in _runs:
        _runs["first"] = run_playbook(lab.inventory, SITE)
    return _runs["first"]


def second_run(lab: Any) -> Any:
    first_run(lab)
    if "second" not in _runs:
        _runs["second"] = run_playbook(lab.inventory, SITE)
    return _runs["second"]


def test_check_mode_on_fresh_hosts_fails_no_task_and_records_nothing(lab: Any) -> None:
    run = fresh_check_run(lab)
    assert run.rc == 0, run.output[-4000:]
    for name in HOSTS:
        assert run.recap[name]["failed"] == 0 and run.recap[name]["changed"] > 0, (name, run.recap[name])
        assert state_of(lab, name)[0] == "deployed"
    assert "+# Managed by Ansible (role nvidia_driver)" in run.output  # --diff shows the files it would write
    assert not ssh(lab, HOSTS[0]).file("/etc/modprobe.d/blacklist-nouveau.conf").exists


def test_first_run_configures_every_host_and_records_it(lab: Any) -> None:
    run = first_run(lab)
    assert run.rc == 0, run.output[-4000:]
    assert set(run.recap) >= set(HOSTS)
    for name in HOSTS:
        assert run.recap[name]["failed"] == 0 and run.recap[name]["unreachable"] == 0
        assert run.recap[name]["changed"] > 0
        assert state_of(lab, name) == ("configured", None)
    # ofed installed DOCA-OFED (its handler sets ofed_changed) before the driver, which DKMS built after it:
    # no rebuild (skipped hosts are not displayed).
    assert task_results(run.output, "nvidia_driver : Reinstall the DKMS package to rebuild its modules") == {}


def task_results(output: str, task: str) -> dict[str, str]:
    """host -> ok/changed/skipping/failed for one task in a playbook's output."""
    block = output.split(f"TASK [{task}]", 1)[1].split("\nTASK [", 1)[0] if f"TASK [{task}]" in output else ""
    return {line.split("[", 1)[1].split("]", 1)[0]: line.split(":", 1)[0]
            for line in block.splitlines() if line.startswith(("ok: [", "changed: [", "skipping: [", "fatal: ["))}


@pytest.mark.parametrize("name", HOSTS)
def test_roles_end_state_over_ssh(lab: Any, name: str) -> None:
    assert first_run(lab).rc == 0
    host = ssh(lab, name)
    # common: chrony, governor, swap, sysctl, limits
    chrony = host.file("/etc/chrony/chrony.conf")
    assert chrony.contains("^pool pool.ntp.org iburst$") and chrony.contains("^makestep 1.0 3$")
    assert enabled(host, "chrony")
    governor = host.file("/etc/systemd/system/cpu-governor.service")
    assert governor.contains("echo performance")
    assert host.file("/etc/systemd/system/multi-user.target.wants/cpu-governor.service").is_symlink
    assert host.run("systemctl is-enabled swap.target").stdout.strip() == "masked"
    assert host.file("/etc/sysctl.d/90-bringup.conf").contains("^net.ipv4.neigh.default.gc_thresh3 = 65536$")
    assert host.file("/etc/security/limits.d/90-bringup.conf").contains("memlock[[:space:]]*unlimited")
    assert host.file("/etc/systemd/system.conf.d/90-bringup-limits.conf").contains("DefaultLimitMEMLOCK=infinity")
    # unattended-upgrades never touches the kernel, the driver stack or OFED
    uu = host.file("/etc/apt/apt.conf.d/51bringup-unattended-upgrades")
    assert all(uu.contains(f'^    "{p}";$') for p in ("linux-", "nvidia-", "libnvidia-", "doca-", "mlnx-"))
    # vendor repositories: signed-by keys verified by fingerprint
    for repo in ("nvidia-cuda", "nvidia-doca", "docker", "nvidia-container-toolkit"):
        sources = host.file(f"/etc/apt/sources.list.d/{repo}.sources")
        assert sources.contains(f"Signed-By: /etc/apt/keyrings/{repo}.asc")
        fprs = host.run(f"gpg --show-keys --with-colons /etc/apt/keyrings/{repo}.asc").stdout
        assert lab.fingerprint in fprs
    # ofed
    assert host.run("ofed_info -s").stdout.strip() == "OFED-internal-24.10-1.1.4:"
    assert enabled(host, "openibd")
    # the running kernel's headers for DKMS (ofed and nvidia_driver), not held
    kernel = host.run("uname -r").stdout.strip()
    assert host.package(f"linux-headers-{kernel}").is_installed
    assert f"linux-headers-{kernel}" not in host.run("apt-mark showhold").stdout.split()
    # nvidia_driver: pinned, held, persistence daemon, module for the running kernel
    for pkg in ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced"):
        assert host.package(pkg).version == DRIVER
    holds = host.run("apt-mark showhold").stdout.split()
    assert {"nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced"} <= set(holds)
    assert enabled(host, "nvidia-persistenced")
    # the packaged unit's --no-persistence-mode is overridden
    assert host.file("/lib/systemd/system/nvidia-persistenced.service").contains("--no-persistence-mode")
    dropin = host.file("/etc/systemd/system/nvidia-persistenced.service.d/bringup-persistence-mode.conf")
    assert dropin.contains("^ExecStart=$") and dropin.contains("^ExecStart=.* --persistence-mode ")
    assert "580.159.04" in host.run("nvidia-smi").stdout
    assert host.file("/etc/modprobe.d/blacklist-nouveau.conf").contains("^blacklist nouveau$")
    # fabric manager locked to the driver
    assert host.package("nvidia-fabricmanager-580").version == DRIVER
    assert "nvidia-fabricmanager-580" in holds and "libnvidia-nscq-580" in holds
    assert enabled(host, "nvidia-fabricmanager")
    # gpudirect_rdma
    # loaded at boot by a unit ordered after openibd (which cannot reload the RDMA stack under it), not by
    # modules-load.d, which runs before openibd
    assert not host.file("/etc/modules-load.d/nvidia-peermem.conf").exists
    peermem_unit = host.file("/etc/systemd/system/nvidia-peermem.service")
    assert peermem_unit.contains("^After=openibd.service$")
    assert peermem_unit.contains("^ExecStart=/sbin/modprobe nvidia_peermem$")
    assert enabled(host, "nvidia-peermem")
    assert host.run("modinfo -F version nvidia-peermem").stdout.strip() == "580.159.04"
    # container_runtime
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert daemon["default-runtime"] == "nvidia" and daemon["log-driver"] == "json-file"
    assert daemon["live-restore"] is True  # a dockerd restart keeps the running containers
    assert "storage-driver" not in daemon  # no pool was created on a test host
    assert host.package("nvidia-container-toolkit").is_installed and enabled(host, "docker")
    # the site's pins (inventory/sim/site.yml versions), as the repositories spell them, held
    for pkg, version in (("nvidia-container-toolkit-base", "1.17.8-1"), ("libnvidia-container1", "1.17.8-1"),
                         ("docker-ce", "5:28.3.3-1~debian.12~bookworm"), ("containerd.io", "1.7.27-1"),
                         ("datacenter-gpu-manager-4-cuda13", "1:4.6.0-1"),  # the site's CUDA 13
                         ("datacenter-gpu-manager-exporter", "4.6.0-4.8.3-1")):
        assert host.package(pkg).version == version and pkg in holds, pkg
    assert host.run("dockerd --validate --config-file /etc/docker/daemon.json").rc == 0
    # dcgm
    assert host.file("/etc/systemd/system/dcgm-exporter.service").contains("--address :9400")
    assert enabled(host, "nvidia-dcgm") and enabled(host, "dcgm-exporter")
    # node_exporter
    textfile = host.file("/var/lib/node_exporter/textfile_collector")
    assert textfile.is_directory and textfile.mode == 0o775
    assert host.file("/etc/default/prometheus-node-exporter").contains(
        "--collector.textfile.directory=/var/lib/node_exporter/textfile_collector")
    assert enabled(host, "prometheus-node-exporter")
    # zfs_raidz: the plan, not the pool, on a chroot
    plan = json.loads(host.file("/etc/bringup/zfs_raidz_plan.json").content_string)
    assert plan["ok"] and plan["created"] is False
    assert plan["command"] == ["zpool", "create", "-o", "ashift=12", "-O", "acltype=posixacl", "-O", "atime=off",
                               "-O", "compression=lz4", "-O", "mountpoint=none", "-O", "xattr=sa", "tank", "raidz2",
                               "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1", "/dev/nvme5n1"]
    assert {e["disk"]: e["reason"] for e in plan["excluded"]}["nvme0n1"] == "holds the OS"
    # health_agent
    assert host.file("/opt/bringup/tools/health/__main__.py").exists
    expectations = json.loads(host.file("/etc/bringup/health.json").content_string)
    assert expectations["host"] == name and expectations["gpu"]["count"] == 2
    assert expectations["storage"]["zpools"] == ["tank"]
    assert host.file("/etc/systemd/system/bringup-health.timer").contains("^OnCalendar=")
    assert host.run("systemctl is-enabled bringup-health.timer").stdout.strip() == "enabled"


def test_second_run_changes_nothing(lab: Any) -> None:
    run = second_run(lab)
    assert run.rc == 0, run.output[-4000:]
    for name in HOSTS:
        lines = [line for line in run.output.splitlines() if line.startswith(("TASK [", "changed:"))]
        changed = [t for t, c in itertools.pairwise(lines) if t.startswith("TASK [") and c.startswith("changed:")]
        assert run.recap[name]["changed"] == 0, (name, run.recap[name], changed)
        assert run.recap[name]["failed"] == 0
    # Every package and unit decision was made from the host_state snapshot: no role had to ask apt or
    # systemd (a unit missing from site.yml's host_state_unit_patterns would, on every run).
    assert "TASK [enabled_units : Enable or mask the units that are not yet]" not in run.output
    assert "TASK [pinned_packages : Install the set in one apt transaction]" not in run.output
    # OFED unchanged: no DKMS rebuild (skipped hosts are not displayed: no host showed the task).
    assert task_results(run.output, "nvidia_driver : Reinstall the DKMS package to rebuild its modules") == {}


def test_check_mode_on_configured_hosts_reports_no_change(lab: Any) -> None:
    assert second_run(lab).rc == 0
    run = run_playbook(lab.inventory, SITE, "--check", "--diff")
    assert run.rc == 0, run.output[-4000:]
    for name in HOSTS:
        assert run.recap[name]["failed"] == 0 and run.recap[name]["changed"] == 0, (name, run.recap[name])


def test_faulty_hosts_fail_with_what_to_fix_and_the_others_finish(lab: Any) -> None:
    assert second_run(lab).rc == 0
    faults.inject(lab, "gpu-r1-01", "disk_mismatch")
    faults.inject(lab, "gpu-r1-02", "held_wrong_version")
    faults.inject(lab, "gpu-r1-03", "missing_peermem")
    faults.inject(lab, "gpu-r1-04", "ofed_removed")
    healthy = ssh(lab, "gpu-r1-04")
    # A hand edit that drops the nvidia runtime and adds a setting: the role merges, never clobbers.
    healthy.run("""printf '{"debug": true, "runtimes": {}}\\n' > /etc/docker/daemon.json""")
    run = run_playbook(lab.inventory, SITE)
    assert run.rc != 0
    for name in ("gpu-r1-01", "gpu-r1-02", "gpu-r1-03"):
        assert run.recap[name]["failed"] == 1, (name, run.recap[name])
    assert run.recap["gpu-r1-04"]["failed"] == 0 and run.recap["gpu-r1-04"]["changed"] >= 1
    assert "the site expects 4 data disks, 3 are usable" in run.output and "/mnt/scratch" in run.output
    assert "nvidia-driver-cuda is held at 580.95.05-1" in run.output
    assert "apt-mark unhold nvidia-driver-cuda" in run.output
    assert "nvidia-peermem is not available for kernel" in run.output
    assert state_of(lab, "gpu-r1-01") == ("failed", "site_refuse_a_disk_layout_that_does_not_match_the_site")
    assert state_of(lab, "gpu-r1-02") == ("failed", "site_refuse_to_move_a_package_held_at_another_version")
    assert state_of(lab, "gpu-r1-03") == ("failed", "site_fail_loudly_when_the_module_is_missing")
    assert state_of(lab, "gpu-r1-04") == ("configured", None)
    daemon = json.loads(healthy.file("/etc/docker/daemon.json").content_string)
    assert daemon["debug"] is True and daemon["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert daemon["live-restore"] is True
    assert daemon["default-runtime"] == "nvidia"
    # OFED installed again under gpu-r1-04's driver: its DKMS modules were rebuilt (the stand-in's scripts),
    # at the installed version and held again; the other hosts' OFED did not change.
    rebuilt = task_results(run.output, "nvidia_driver : Reinstall the DKMS package to rebuild its modules")
    assert rebuilt == {"gpu-r1-04": "changed"}, rebuilt
    assert healthy.run("ofed_info -s").stdout.strip() == "OFED-internal-24.10-1.1.4:"
    assert healthy.package("nvidia-kernel-open-dkms").version == DRIVER
    assert "nvidia-kernel-open-dkms" in healthy.run("apt-mark showhold").stdout.split()
    assert healthy.run("modinfo -F version nvidia-peermem").stdout.strip() == "580.159.04"


def test_unreachable_apt_source_fails_that_host_with_the_url(lab: Any) -> None:
    faults.inject(lab, "gpu-r1-04", "apt_unreachable")
    run = run_playbook(lab.inventory, SITE, "--limit", "gpu-r1-04")
    assert run.rc != 0 and run.recap["gpu-r1-04"]["failed"] == 1
    dead = lab.repo_url.rsplit(":", 1)[0] + ":1/docker"
    assert f"apt cannot read the docker repository at {dead}" in run.output
    state, reason = state_of(lab, "gpu-r1-04")
    assert state == "failed" and reason == "site_say_which_repository_is_unreachable"
    # The definition was removed so that the next run retries it.
    assert not ssh(lab, "gpu-r1-04").file("/etc/apt/sources.list.d/docker.sources").exists


def test_static_inventory_export_lists_the_same_hosts(lab: Any, tmp_path: Path) -> None:
    from provision.ansible_inventory import load_inventory, to_ini

    exported = tmp_path / "hosts.ini"
    exported.write_text(to_ini(load_inventory(lab.site_file, lab.state_db)))
    import subprocess

    from tests.ansible.conftest import BIN

    listed = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(exported), "--list"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    doc = json.loads(listed.stdout)
    assert sorted(doc["role_gpu"]["hosts"]) == list(HOSTS)
    assert doc["_meta"]["hostvars"]["gpu-r1-02"]["ansible_host"] == "127.0.1.2"
    assert doc["_meta"]["hostvars"]["gpu-r1-02"]["bringup_hardware"]["nvme_data_disks"] == 4


def _last_event(lab: Any, host: str) -> Any:
    from provision.state import StateStore

    with StateStore(lab.state_db) as store:
        return store.history(host)[-1]


def test_an_unreachable_host_is_recorded_failed_even_when_it_is_the_only_one(lab: Any) -> None:
    from sim.testhosts import hosts as th

    assert th.stop(lab.host("gpu-r1-03")) == []  # its sshd (and everything in it) is gone
    run = run_playbook(lab.inventory, SITE, "--limit", "gpu-r1-03")
    assert run.rc != 0 and run.recap["gpu-r1-03"]["failed"] == 1
    assert state_of(lab, "gpu-r1-03") == ("failed", "site_unreachable_over_ssh")
    event = _last_event(lab, "gpu-r1-03")
    assert event.command == "site.yml" and event.evidence["outcome"] == "failed"
    assert "ssh" in event.evidence["message"].lower()


def test_an_unreachable_host_does_not_stop_the_others(lab: Any) -> None:
    from sim.testhosts import hosts as th

    th.stop(lab.host("gpu-r1-03"))
    (lab.run_dir / "inventory" / "host_vars" / "gpu-r1-04.yml").unlink()  # gpu-r1-04's repository is back
    before = _last_event(lab, "gpu-r1-03").id
    run = run_playbook(lab.inventory, SITE)
    assert run.rc != 0
    assert run.recap["gpu-r1-04"]["failed"] == 0 and run.recap["gpu-r1-04"]["ok"] > 20
    assert state_of(lab, "gpu-r1-04") == ("configured", None)
    # gpu-r1-01 still has its disk fault: it ran its roles up to it and failed for its own reason.
    assert state_of(lab, "gpu-r1-01") == ("failed", "site_refuse_a_disk_layout_that_does_not_match_the_site")
    assert state_of(lab, "gpu-r1-03") == ("failed", "site_unreachable_over_ssh")
    assert _last_event(lab, "gpu-r1-03").id > before
