"""`playbooks/controller.yml`'s monitoring play (roles node_exporter, prometheus_server, alertmanager) on a Debian 12
test host of its own standing in for the controller, with Debian's real `prometheus` and `prometheus-alertmanager`
(in the test hosts' base, sim/testhosts/base.py): a first run configures, a second and a --check run change
nothing; the host's own promtool and amtool accept what the roles wrote; the units are enabled (no init runs in a
chroot, so nothing is started by the roles); and the real daemons, started over SSH as Debian's units start them
(user prometheus, the ARGS of the role's /etc/default file), load the role's configuration and rules: Prometheus
serves the bringup rule groups and sends to the Alertmanager the role configured, which answers. The roles'
variables come from the inventory as an operator's would (the lab's group variables, this run's host variables);
only the play's host selection (`monitoring_hosts`) is given on the command line.

One host (127.0.1.141), three playbook runs.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml

from sim.addresses import free_port as _free_port
from tests.ansible.conftest import REPO, PlaybookRun, enabled, run_playbook, ssh, start_own_test_hosts

pytestmark = pytest.mark.slow

PLAYBOOK = REPO / "playbooks" / "controller.yml"
RULES = REPO / "roles" / "prometheus_server" / "files" / "rules" / "bringup.rules.yml"
HOST = "gpu-r1-01"
# Test host #141: not the package lab's (#1-#4) nor another module's own (#101-#103, #121).
ADDRESS_OFFSET = 140
UNITS = ("prometheus-node-exporter.service", "prometheus.service", "prometheus-alertmanager.service",
         "bringup-scrape-targets.timer")
READY_TIMEOUT_S = 30.0
_runs: dict[str, PlaybookRun] = {}


@dataclass(frozen=True)
class Monitoring:
    lab: Any
    address: str
    prometheus_port: int
    alertmanager_port: int
    scratch: str  # a folder under /tmp on the host, named for this run only (the daemons' data, their logs)

    @property
    def extra_vars(self) -> list[str]:
        """The play's host selection, as an operator names another host than the site's controller."""
        return ["-e", f"monitoring_hosts={HOST}"]

    def write_host_vars(self) -> None:
        """This run's addresses and scratch folder as the host's inventory variables (the chroot switches,
        `*_manage_services` off, are the lab's group variables)."""
        path = self.lab.run_dir / "inventory" / "host_vars" / f"{HOST}.yml"
        current = yaml.safe_load(path.read_text()) if path.exists() else None
        path.write_text(yaml.safe_dump({
            **(current or {}),
            "prometheus_server_listen_address": f"{self.address}:{self.prometheus_port}",
            "prometheus_server_alertmanagers": [f"{self.address}:{self.alertmanager_port}"],
            "alertmanager_listen_address": f"{self.address}:{self.alertmanager_port}",
            "alertmanager_storage_dir": f"{self.scratch}/alertmanager",
        }, sort_keys=True))


@pytest.fixture(scope="module")
def monitoring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitoring]:
    from sim.testhosts import lab as lab_mod

    run_dir = tmp_path_factory.mktemp("monitoring")
    started: Any = start_own_test_hosts(run_dir, 1, ADDRESS_OFFSET)
    try:
        address = started.host(HOST).address
        monitoring = Monitoring(started, address, _free_port(address), _free_port(address),
                                f"/tmp/bringup-monitoring-{uuid.uuid4().hex[:12]}")
        monitoring.write_host_vars()
        yield monitoring
    finally:
        assert lab_mod.down(run_dir) == []


def playbook(monitoring: Monitoring, name: str) -> PlaybookRun:
    """The named run (first, second, check), each run once, in that order."""
    order = ["first", "second", "check"]
    for step in order[: order.index(name) + 1]:
        if step not in _runs:
            if step == "first":
                # Debian's maintainer scripts enable the services at install: disabled, as an operator may have
                # left them, so that the enabled state below is the roles' doing.
                done = _ssh(monitoring, "systemctl disable prometheus.service prometheus-alertmanager.service")
                assert done.returncode == 0, done.stderr
            extra = ["--check", "--diff"] if step == "check" else []
            _runs[step] = run_playbook(monitoring.lab.inventory, PLAYBOOK, *monitoring.extra_vars, *extra, timeout=600)
    return _runs[name]


@pytest.fixture(scope="module")
def configured(monitoring: Monitoring) -> Monitoring:
    first = playbook(monitoring, "first")
    assert first.rc == 0, first.output[-4000:]
    return monitoring


def test_the_monitoring_play_configures_the_controller_then_changes_nothing_even_in_check_mode(
        configured: Monitoring) -> None:
    first = playbook(configured, "first")
    assert first.recap[HOST]["changed"] > 0 and first.recap[HOST]["failed"] == 0, first.output[-4000:]
    again = playbook(configured, "second")
    assert again.rc == 0 and again.recap[HOST]["changed"] == 0, again.output[-4000:]
    check = playbook(configured, "check")
    assert check.rc == 0 and check.recap[HOST]["changed"] == 0, check.output[-4000:]


def test_the_hosts_own_promtool_and_amtool_accept_what_the_roles_wrote(configured: Monitoring) -> None:
    host = ssh(configured.lab, HOST)
    config = host.run("promtool check config /etc/prometheus/prometheus.yml")
    assert config.rc == 0, config.stdout + config.stderr
    assert "SUCCESS: 1 rule files found" in config.stdout + config.stderr
    rules = host.run("promtool check rules /etc/prometheus/rules.d/bringup.rules.yml")
    assert rules.rc == 0 and "SUCCESS" in rules.stdout, rules.stdout + rules.stderr
    routes = host.run("amtool check-config /etc/prometheus/alertmanager.yml")
    assert routes.rc == 0 and "SUCCESS" in routes.stdout, routes.stdout + routes.stderr
    # Debian's units run the daemons as the prometheus user: the Alertmanager configuration (which may hold
    # webhook tokens) is readable by its group, not by everyone.
    alertmanager = host.file("/etc/prometheus/alertmanager.yml")
    assert (alertmanager.user, alertmanager.group, alertmanager.mode) == ("root", "prometheus", 0o640)


def test_the_units_the_roles_enable_are_enabled(configured: Monitoring) -> None:
    host = ssh(configured.lab, HOST)
    assert [unit for unit in UNITS if not enabled(host, unit)] == []


def _ssh(monitoring: Monitoring, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`command` on the host over SSH, bounded (testinfra's run has no timeout)."""
    run_dir = monitoring.lab.run_dir
    return subprocess.run(["ssh", "-i", str(monitoring.lab.ssh_key), "-o", "BatchMode=yes",
                           "-o", f"UserKnownHostsFile={run_dir / 'ssh' / 'known_hosts'}",
                           "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10",
                           f"root@{monitoring.address}", command],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _start(monitoring: Monitoring, name: str, command: str) -> None:
    """`command` in the background on the host as Debian's unit runs it (user prometheus, the ARGS of its
    /etc/default file), its output in the scratch folder; the SSH session returns at once (the background
    command alone holds no descriptor of it)."""
    log = f"{monitoring.scratch}/{name}.log"
    done = _ssh(monitoring, f"set -a && . /etc/default/{name} && set +a && "
                            f"{{ nohup setsid setpriv --reuid=prometheus --regid=prometheus --init-groups {command} "
                            f">{log} 2>&1 </dev/null & }}")
    assert done.returncode == 0, done.stdout + done.stderr


def _wait_ready(client: httpx.Client, url: str, monitoring: Monitoring, log: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            if client.get(f"{url}/-/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{url} not ready within {READY_TIMEOUT_S:.0f} s:\n{_ssh(monitoring, f'tail -n 30 {log}').stdout}")
        time.sleep(0.3)


@pytest.fixture
def daemons(configured: Monitoring) -> Iterator[Monitoring]:
    """Prometheus and Alertmanager running on the host (their data in the scratch folder); both are stopped
    afterwards (pkill over SSH, matched on the scratch folder, which only their command lines name: the host
    shares this machine's process table)."""
    scratch = configured.scratch
    done = _ssh(configured, f"install -d -o prometheus -g prometheus {scratch}")
    assert done.returncode == 0, done.stderr
    # "[/]tmp/...": matches the daemons' command lines, not the shell that runs pkill with it.
    pattern = "[/]" + scratch.lstrip("/") + "/"
    try:
        _start(configured, "prometheus-alertmanager", "/usr/bin/prometheus-alertmanager $ARGS")
        _start(configured, "prometheus", f"/usr/bin/prometheus $ARGS --storage.tsdb.path={scratch}/prometheus")
        yield configured
    finally:
        _ssh(configured, f"pkill -TERM -f '{pattern}'; for _ in $(seq 50); do pgrep -f '{pattern}' >/dev/null "
                         f"|| exit 0; sleep 0.1; done; pkill -KILL -f '{pattern}'")
        left = _ssh(configured, f"pgrep -af '{pattern}'")
        assert left.returncode == 1 and left.stdout == "", left.stdout


def test_the_real_daemons_load_the_rules_and_alerting_the_roles_wrote(daemons: Monitoring) -> None:
    prometheus = f"http://{daemons.address}:{daemons.prometheus_port}"
    alertmanager = f"http://{daemons.address}:{daemons.alertmanager_port}"
    # trust_env=False: no proxy from the environment; only the host's own loopback address is asked.
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        _wait_ready(client, alertmanager, daemons, f"{daemons.scratch}/prometheus-alertmanager.log")
        _wait_ready(client, prometheus, daemons, f"{daemons.scratch}/prometheus.log")

        groups = client.get(f"{prometheus}/api/v1/rules").json()["data"]["groups"]
        want = {group["name"] for group in yaml.safe_load(RULES.read_text())["groups"]}
        assert {g["name"] for g in groups} == want
        assert {g["file"] for g in groups} == {"/etc/prometheus/rules.d/bringup.rules.yml"}
        assert sum(len(g["rules"]) for g in groups) == sum(len(g["rules"]) for g in
                                                           yaml.safe_load(RULES.read_text())["groups"])

        loaded = yaml.safe_load(client.get(f"{prometheus}/api/v1/status/config").json()["data"]["yaml"])
        targets = [t for am in loaded["alerting"]["alertmanagers"] for sc in am["static_configs"] for t in sc["targets"]]
        assert targets == [f"{daemons.address}:{daemons.alertmanager_port}"]
        # Prometheus's own view of where its alerts go (its notifier's discovery settles a few seconds after
        # ready): the running Alertmanager.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (active := client.get(f"{prometheus}/api/v1/alertmanagers").json()["data"]["activeAlertmanagers"]):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [a["url"] for a in active] == [f"{alertmanager}/api/v2/alerts"]

        status = client.get(f"{alertmanager}/api/v2/status")
        assert status.status_code == 200
        answer = status.json()
        assert answer["cluster"]["status"] == "disabled"  # --cluster.listen-address= from the role's ARGS
        assert [r["name"] for r in yaml.safe_load(answer["config"]["original"])["receivers"]] == ["bringup"]
