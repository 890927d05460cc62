"""Slurm on the hosts (roles/munge, slurm_conf, slurm_controller, slurm_node) by `site.yml`, on two Debian 12 test
hosts with Debian's real MUNGE 0.5.15 and Slurm 22.05.8 (in the test hosts' base, sim/testhosts/base.py).

The lab's site gets a `slurm` section (gpu-r1-01 the controller, two partitions over the test class) and a MUNGE
key beside it (the munge role's default path); the roles' variables come from the inventory as an operator's
would. What only this test needs is its group variables: free ports (both hosts share one network, so the second
slurmd gets a Port= of its own) and the no-cgroup plugins, since a chroot has no cgroup filesystem to give slurmd.
`site.yml` (both hosts through the GPU-host play, gpu-r1-01 also through the Slurm controller play): a first run
configures, a second and a --check run change nothing. Then the daemons are started over
SSH the way the lab starts sshd (no init in a chroot): munged on both hosts, slurmctld on gpu-r1-01, slurmd on both;
`sinfo` must list both nodes idle and `scontrol show config/node/partition` say what the roles meant (Gres,
partitions, health check). Last, a key readable by others is refused on the controller with what to do, before
anything is copied, and both hosts are recorded failed with it.

Two hosts (127.0.1.161-162), five playbook runs (about a minute).
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.addresses import free_port
from tests.ansible.conftest import REPO, PlaybookRun, enabled, run_playbook, ssh, start_own_test_hosts, state_of

# As users type it: the top-level site.yml (importing playbooks/site.yml).
SITE = REPO / "site.yml"
HOSTS = ("gpu-r1-01", "gpu-r1-02")
CONTROLLER = HOSTS[0]
GPUS = 2  # the test class's gpu.count (the embedded site's hgx-h200-sim: 2x NVIDIA H200)
# Test hosts #161-#162: not the package lab's (#1-#4) nor another module's own (#101-#103, #121, #141).
ADDRESS_OFFSET = 160
# glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm uses, resolves nothing in a network namespace whose only IPv4
# address is 127.0.0.1: a second loopback address fixes it (tests/xdist_workers.py gives its namespaces this one).
LOOPBACK_ALIAS = "127.0.2.250/32"
READY_TIMEOUT_S = 60.0
_runs: dict[str, PlaybookRun] = {}
_health_drains: dict[str, str] = {}  # node -> the reason its HealthCheckProgram drained it with


@dataclass(frozen=True)
class SlurmLab:
    lab: Any
    key: Path
    ctld_port: int
    slurmd_port: int
    second_slurmd_port: int

    def address(self, name: str) -> str:
        return str(self.lab.host(name).address)

    def root(self, name: str) -> Path:
        return Path(self.lab.host(name).root)


TOPOLOGY = "SwitchName=leaf-A-r3-U40 Nodes=gpu-r1-[01-02]\nSwitchName=spine-A-r3-U18 Switches=leaf-A-r3-U40\n"

def _addrconfig_resolves(address: str) -> bool:
    try:
        socket.getaddrinfo(address, 22, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_ADDRCONFIG)
    except socket.gaierror:
        return False
    return True


@contextlib.contextmanager
def _addrconfig(address: str) -> Iterator[None]:
    """Slurm's name resolution working in this network namespace: when it does not and the namespace is a private
    one (an xdist worker's), the loopback alias is added for the module and removed afterwards; the machine's own
    namespace is never changed."""
    if _addrconfig_resolves(address):
        yield
        return
    if os.readlink("/proc/thread-self/ns/net") == os.readlink("/proc/1/ns/net"):
        pytest.fail(f"getaddrinfo(AI_ADDRCONFIG) cannot resolve {address} in the machine's own network namespace "
                    "(no address but 127.0.0.1?): Slurm's daemons could not reach each other")
    subprocess.run(["ip", "addr", "add", LOOPBACK_ALIAS, "dev", "lo"], check=True, capture_output=True, timeout=10)
    try:
        yield
    finally:
        subprocess.run(["ip", "addr", "del", LOOPBACK_ALIAS, "dev", "lo"], check=False, capture_output=True,
                       timeout=10)


def _add_slurm_to_the_site(lab: Any, ctld_port: int, slurmd_port: int) -> None:
    site_file = Path(lab.site_file)
    doc = yaml.safe_load(site_file.read_text())
    test_class = next(iter(doc["host_classes"]))
    doc["slurm"] = {
        "cluster_name": "testhosts",
        "controller": CONTROLLER,
        "controller_port": ctld_port,
        "node_port": slurmd_port,
        "partitions": [{"name": "gpu", "classes": [test_class], "default": True, "max_time": "1-00:00:00"},
                       {"name": "debug", "classes": [test_class], "max_time": "30"}],
        "health_check_interval_s": 300,
    }
    site_file.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmLab]:
    from sim.addresses import lab_host_address
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("slurm")
    with _addrconfig(lab_host_address(ADDRESS_OFFSET + 1)):
        started: Any = start_own_test_hosts(run_dir, len(HOSTS), ADDRESS_OFFSET)
        try:
            ports = (free_port(""), free_port(""), free_port(""))
            lab = SlurmLab(started, run_dir / "munge.key", *ports)
            _add_slurm_to_the_site(started, lab.ctld_port, lab.slurmd_port)
            # The munge role's default: munge.key beside the site file, as an operator makes it (dd, 0400).
            lab.key.write_bytes(os.urandom(1024))
            lab.key.chmod(0o400)
            (run_dir / "inventory" / "group_vars" / "all" / "60-slurm-test.yml").write_text(yaml.safe_dump({
                "slurm_conf_node_attributes": {HOSTS[1]: {"Port": lab.second_slurmd_port}},
                "slurm_conf_proctrack_type": "proctrack/linuxproc",
                "slurm_conf_task_plugin": "task/none",
                "slurm_node_cgroup_plugin": "cgroup/v1",
                # topology.conf as `fabric topology --format slurm` writes it (a leaf with its nodes, a spine above)
                "slurm_conf_topology": TOPOLOGY,
            }, sort_keys=True))
            # The GPUs' device files gres.conf names (slurmd waits for them; nothing opens them).
            for name in HOSTS:
                for index in range(GPUS):
                    os.mknod(lab.root(name) / "dev" / f"nvidia{index}", stat.S_IFCHR | 0o666, os.makedev(195, index))
            yield lab
        finally:
            assert lab_mod.down(run_dir) == []


def playbook(lab: SlurmLab, name: str) -> PlaybookRun:
    """The named run (first, second, check), each run once, in that order."""
    order = ["first", "second", "check"]
    for step in order[: order.index(name) + 1]:
        if step not in _runs:
            if step == "first":
                # Debian's maintainer scripts enable the units at install (the base has all three everywhere):
                # disabled, so that the enabled state below is the roles' doing.
                for host in HOSTS:
                    done = _ssh(lab, host, "systemctl disable munge.service slurmd.service slurmctld.service")
                    assert done.returncode == 0, done.stderr
            extra = ["--check", "--diff"] if step == "check" else []
            _runs[step] = run_playbook(lab.lab.inventory, SITE, *extra, timeout=600)
    return _runs[name]


@pytest.fixture(scope="module")
def configured(slurm: SlurmLab) -> SlurmLab:
    first = playbook(slurm, "first")
    assert first.rc == 0, first.output[-4000:]
    return slurm


def _ssh(lab: SlurmLab, name: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`command` on the host over SSH, bounded (testinfra's run has no timeout)."""
    run_dir = lab.lab.run_dir
    return subprocess.run(["ssh", "-i", str(lab.lab.ssh_key), "-o", "BatchMode=yes",
                           "-o", f"UserKnownHostsFile={run_dir / 'ssh' / 'known_hosts'}",
                           "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10",
                           f"root@{lab.address(name)}", command],
                          capture_output=True, text=True, timeout=timeout, check=False)


# --- the playbook ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_site_yml_configures_both_hosts_then_changes_nothing_even_in_check_mode(configured: SlurmLab) -> None:
    first = playbook(configured, "first")
    for name in HOSTS:
        assert first.recap[name]["changed"] > 0 and first.recap[name]["failed"] == 0, first.output[-4000:]
    again = playbook(configured, "second")
    assert again.rc == 0, again.output[-4000:]
    for name in HOSTS:
        assert again.recap[name]["changed"] == 0, (name, again.output[-4000:])
    # every package and unit decision came from the host_state snapshot (site.yml's unit patterns name the Slurm ones)
    assert "TASK [enabled_units : Enable or mask the units that are not yet]" not in again.output
    assert [state_of(configured.lab, name)[0] for name in HOSTS] == ["configured", "configured"]
    check = playbook(configured, "check")
    assert check.rc == 0, check.output[-4000:]
    for name in HOSTS:
        assert check.recap[name]["changed"] == 0 and check.recap[name]["failed"] == 0, (name, check.output[-4000:])


@pytest.mark.slow
def test_every_host_has_the_same_slurm_conf_and_its_own_gres_cgroup_and_key(configured: SlurmLab) -> None:
    conf = {name: (configured.root(name) / "etc/slurm/slurm.conf").read_text() for name in HOSTS}
    nodes = {name: (configured.root(name) / "etc/slurm/nodes.conf").read_text() for name in HOSTS}
    assert conf[HOSTS[0]] == conf[HOSTS[1]] and nodes[HOSTS[0]] == nodes[HOSTS[1]]
    text = conf[CONTROLLER]
    assert f"SlurmctldHost={CONTROLLER}({configured.address(CONTROLLER)})\n" in text
    assert "HealthCheckProgram=/usr/local/sbin/bringup-slurm-health-check\nHealthCheckInterval=300\n" in text
    assert "GresTypes=gpu\n" in text and "Include /etc/slurm/nodes.conf\n" in text
    lines = [line for line in nodes[CONTROLLER].splitlines() if not line.startswith("#")]
    # CPUs and memory from gpu-r1-01's facts (the class's first configurable node), less the 8192 MiB reserve
    cpus = os.cpu_count()
    with open("/proc/meminfo", encoding="ascii") as handle:
        memtotal_mb = int(handle.readline().split()[1]) // 1024
    first, second = (f"NodeName={HOSTS[0]} NodeAddr={configured.address(HOSTS[0])} CPUs={cpus} RealMemory=",
                     f"NodeName={HOSTS[1]} NodeAddr={configured.address(HOSTS[1])} CPUs={cpus} RealMemory=")
    assert lines[0].startswith(first) and lines[1].startswith(second), lines
    assert abs(int(lines[0].split("RealMemory=")[1].split()[0]) - (memtotal_mb - 8192)) <= 64, lines[0]
    assert lines[0].endswith(" Gres=gpu:h200:2")
    assert lines[1].endswith(f" Gres=gpu:h200:2 Port={configured.second_slurmd_port}")
    assert lines[2:] == [f"PartitionName=gpu Nodes={HOSTS[0]},{HOSTS[1]} Default=YES MaxTime=1-00:00:00 State=UP",
                         f"PartitionName=debug Nodes={HOSTS[0]},{HOSTS[1]} Default=NO MaxTime=30 State=UP"]
    for name in HOSTS:
        root = configured.root(name)
        assert "\nName=gpu Type=h200 File=/dev/nvidia[0-1]\n" in (root / "etc/slurm/gres.conf").read_text()
        cgroup = (root / "etc/slurm/cgroup.conf").read_text()
        assert "CgroupPlugin=cgroup/v1\nConstrainDevices=yes\nConstrainCores=yes\nConstrainRAMSpace=yes\n" in cgroup
        check = root / "usr/local/sbin/bringup-slurm-health-check"
        assert stat.S_IMODE(check.stat().st_mode) == 0o755
        assert ("cd /opt/bringup || exit 1\nexec /usr/bin/python3 -m tools.slurm_health_check "
                "--agent-config /etc/bringup/health.json \"$@\"\n") in check.read_text()
        host = ssh(configured.lab, name)
        key = host.file("/etc/munge/munge.key")
        assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400)
        assert (root / "etc/munge/munge.key").read_bytes() == configured.key.read_bytes()
        assert enabled(host, "munge.service") and enabled(host, "slurmd.service")
        assert enabled(host, "slurmctld.service") == (name == CONTROLLER)
    state = ssh(configured.lab, CONTROLLER).file("/var/lib/slurm/slurmctld")
    assert (state.user, state.mode) == ("slurm", 0o700)
    # the key was never printed: not in any run's output, in any encoding
    secret = configured.key.read_bytes()
    for run in _runs.values():
        assert base64.b64encode(secret).decode() not in run.output and secret.hex() not in run.output


# --- the real daemons --------------------------------------------------------------------------------------------


def _start_daemons(lab: SlurmLab) -> None:
    """munged on both hosts (as Debian's unit: user munge, /run/munge), slurmctld on the controller, slurmd on both;
    each forks into the background by itself, so the SSH session returns."""
    for name in HOSTS:
        done = _ssh(lab, name, "install -d -o munge -g munge -m 0755 /run/munge "
                               "&& setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged")
        assert done.returncode == 0, done.stdout + done.stderr
    done = _ssh(lab, CONTROLLER, "/usr/sbin/slurmctld")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in HOSTS:
        done = _ssh(lab, name, "/usr/sbin/slurmd")
        assert done.returncode == 0, done.stdout + done.stderr


def _logs(lab: SlurmLab) -> str:
    return "\n".join(_ssh(lab, name, "tail -n 20 /var/log/slurm/*.log").stdout for name in HOSTS)


def _node_states(lab: SlurmLab) -> dict[str, tuple[str, str]]:
    """{node: (sinfo's compact state, reason)} as gpu-r1-02 (not the controller) sees them."""
    answer = _ssh(lab, HOSTS[1], "sinfo --noheader --Node --partition=gpu --format='%N|%t|%E'")
    return {n: (t, e) for n, t, e in (line.split("|", 2) for line in answer.stdout.splitlines() if line.count("|") == 2)}


def _wait_for(lab: SlurmLab, wanted: set[str]) -> dict[str, tuple[str, str]]:
    """The nodes' states once both are among `wanted` (registered: no '*' of a node not responding)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        states = _node_states(lab)
        if set(states) == set(HOSTS) and {t for t, _ in states.values()} <= wanted:
            return states
        if time.monotonic() > deadline:
            pytest.fail(f"sinfo: {states}; the daemons' logs:\n{_logs(lab)}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def running(configured: SlurmLab) -> SlurmLab:
    """The daemons up and both nodes idle (the hosts' processes end with the lab: sim.testhosts' down stops every
    process whose root is a host's). slurmd runs the HealthCheckProgram at its start, before it registers: the
    health agent site.yml installed judges these chroots (no GPU nor HCA behind them) critical and drains the node
    with its reason, which shows the check wired end to end; the nodes are then resumed, and stay idle until the
    next check (HealthCheckInterval=300)."""
    playbook(configured, "check")  # the no-change runs before the daemons write their state
    _start_daemons(configured)
    registered = _wait_for(configured, {"idle", "drain"})
    drained = [n for n, (t, _) in registered.items() if t == "drain"]
    for name in drained:
        assert registered[name][1].startswith("bringup-check: "), registered
    _health_drains.update({n: registered[n][1] for n in drained})
    if drained:
        done = _ssh(configured, CONTROLLER, f"scontrol update NodeName={','.join(drained)} State=RESUME")
        assert done.returncode == 0, done.stdout + done.stderr
    _wait_for(configured, {"idle"})
    return configured


def _fields(text: str) -> dict[str, str]:
    """`Key=Value` fields of scontrol's show output."""
    return dict(part.split("=", 1) for part in text.split() if "=" in part)


@pytest.mark.slow
def test_slurmctld_reads_back_the_topology_the_roles_installed(running: SlurmLab) -> None:
    shown = _ssh(running, CONTROLLER, "scontrol show topology")
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line for line in shown.stdout.splitlines() if line.startswith("SwitchName=")}
    assert "Level=0" in lines["SwitchName=leaf-A-r3-U40"] and "Nodes=gpu-r1-[01-02]" in lines["SwitchName=leaf-A-r3-U40"]
    assert "Level=1" in lines["SwitchName=spine-A-r3-U18"] and "Switches=leaf-A-r3-U40" in lines["SwitchName=spine-A-r3-U18"]
    config = _ssh(running, CONTROLLER, "scontrol show config").stdout
    assert "topology/tree" in config


def test_sinfo_lists_both_nodes_idle_and_scontrol_shows_what_the_roles_meant(running: SlurmLab) -> None:
    config = _ssh(running, CONTROLLER, "scontrol show config")
    assert config.returncode == 0, config.stderr
    settings = {k.strip(): v.strip() for k, _, v in (line.partition(" = ") for line in config.stdout.splitlines())}
    assert settings["ClusterName"] == "testhosts"
    assert settings["SlurmctldHost[0]"] == f"{CONTROLLER}({running.address(CONTROLLER)})"
    assert settings["SlurmctldPort"] == str(running.ctld_port)
    assert settings["HealthCheckProgram"] == "/usr/local/sbin/bringup-slurm-health-check"
    assert settings["HealthCheckInterval"] == "300 sec"
    assert settings["GresTypes"] == "gpu"
    assert settings["AuthType"] == "auth/munge"
    # the health check ran at slurmd's start and drained with the agent's critical verdict (these chroots show no
    # GPU), the reason in the shape provision/slurm reads back; on the controller's own host it may run before
    # slurmctld answers, and its drain is then made at the next interval (300 s): at least one node, every one
    # in that shape
    assert _health_drains and set(_health_drains) <= set(HOSTS), _health_drains
    assert all(r.startswith("bringup-check: pcie_function_missing (") for r in _health_drains.values()), _health_drains
    for name in HOSTS:
        node = _fields(_ssh(running, CONTROLLER, f"scontrol show node {name}").stdout)
        assert node["Gres"] == "gpu:h200:2" and node["State"] == "IDLE", node
        assert node["NodeAddr"] == running.address(name) and node["CPUTot"] == str(os.cpu_count())
        assert sorted(node["Partitions"].split(",")) == ["debug", "gpu"]
    gpu = _fields(_ssh(running, HOSTS[1], "scontrol show partition gpu").stdout)
    assert (gpu["Default"], gpu["MaxTime"], gpu["Nodes"]) == ("YES", "1-00:00:00", "gpu-r1-[01-02]")
    debug = _fields(_ssh(running, HOSTS[1], "scontrol show partition debug").stdout)
    assert (debug["Default"], debug["MaxTime"]) == ("NO", "00:30:00")


# --- the key -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_munge_key_others_can_read_is_refused_with_what_to_do(running: SlurmLab) -> None:
    """Last of the runs (it leaves both hosts failed)."""
    running.key.chmod(0o644)
    try:
        run = run_playbook(running.lab.inventory, SITE, timeout=300)
    finally:
        running.key.chmod(0o400)
    assert run.rc != 0
    said = (f"the MUNGE key file {running.key} has mode 0644, which lets its group or others read it: "
            f"chmod 0400 {running.key}")
    assert f"Refuse a MUNGE key with the wrong mode or length: {said}" in run.output, run.output[-4000:]
    assert "TASK [munge : Install the MUNGE key]" not in run.output
    assert base64.b64encode(running.key.read_bytes()).decode() not in run.output
    for name in HOSTS:
        assert state_of(running.lab, name) == ("failed", "site_refuse_a_munge_key_with_the_wrong_mode_or_length")


@pytest.mark.slow
def test_the_inventory_exports_the_nodes_and_the_slurm_groups(slurm: SlurmLab) -> None:
    from provision.ansible_inventory.build import load_inventory

    inventory = load_inventory(Path(slurm.lab.site_file), Path(slurm.lab.state_db))
    assert inventory.groups["slurm_controller"] == (CONTROLLER,)
    assert inventory.groups["slurm_nodes"] == HOSTS
    assert inventory.all_vars["bringup_slurm_controller_address"] == slurm.address(CONTROLLER)
    assert inventory.all_vars["bringup_slurm_nodes"][HOSTS[1]] == {
        "address": slurm.address(HOSTS[1]), "class": "hgx-h200-testhost", "gpus": GPUS, "gpu_type": "h200"}
