"""Handlers notified by one task that writes several files run only for the file they concern.

The test hosts cannot restart services (their inventory turns service management off), so the
playbook runs never reach these conditions; here each handler's `when` is evaluated by Ansible's own
templating (in a child process, handler_conditions_eval.handlers_running) against the names the roles' file-writing
tasks report in `changed_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.handler_conditions_eval import handlers_running

ROLES = Path(__file__).resolve().parents[2] / "roles"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_common_declares_the_file_names_its_handlers_look_for() -> None:
    names = [f["name"] for f in _yaml(ROLES / "common" / "vars" / "main.yml")["common_files"]]
    # unattended_upgrades has no handler: unattended-upgrades reads its configuration on every run.
    assert sorted(names) == ["chrony", "governor", "limits", "sysctl", "systemd_limits", "unattended_upgrades"]


COMMON_CASES: list[tuple[list[str], set[str]]] = [
    (["chrony"], {"Restart chrony"}),
    (["governor"], {"Reload systemd", "Apply the CPU governor"}),
    (["sysctl"], {"Apply kernel parameters"}),
    (["limits"], set()),  # PAM limits apply at the next login: nothing to restart
    (["systemd_limits"], {"Reload systemd"}),
    (["chrony", "sysctl"], {"Restart chrony", "Apply kernel parameters"}),
    ([], set()),
]


def test_common_runs_only_the_handlers_of_the_files_that_changed_and_none_where_services_are_off() -> None:
    live = [("common", {"common_manage_services": True, "common_apply_runtime": True, "common_files_changed": c})
            for c, _ in COMMON_CASES]
    off = ("common", {"common_manage_services": False, "common_apply_runtime": False,
                      "common_files_changed": ["chrony", "governor", "sysctl", "limits", "systemd_limits"]})
    *results, nothing = handlers_running(*live, off)
    assert results == [expected for _, expected in COMMON_CASES]
    assert nothing == set()


def test_health_agent_reloads_systemd_when_a_unit_changed_not_when_only_the_expectations_did() -> None:
    tasks = _yaml(ROLES / "health_agent" / "tasks" / "main.yml")
    task = next(t for t in tasks if "managed_files" in t)
    names = [f.get("name") or f["dest"] for f in task["managed_files"]["files"]]
    assert names.count("unit") == 2 and len(names) == 4
    expectations = "/etc/bringup/health.json"  # the expectations file reports its dest (a template in the task)
    pth = "/usr/lib/python3/dist-packages/bringup-tools.pth"  # the agent on the system Python's path
    cases = [["unit"], [expectations, "unit"], [expectations, pth], []]
    results = handlers_running(*(("health_agent", {"health_agent_manage_services": True,
                                           "health_agent_files_written": {"changed_files": c}}) for c in cases))
    reload = "Reload systemd for the health units"
    assert [reload in r for r in results] == [True, True, False, False]


@pytest.mark.parametrize(("changed", "restarts"), [(["/etc/default/prometheus-node-exporter"], True), ([], False)])
def test_node_exporter_restarts_when_its_arguments_changed_only(changed: list[str], restarts: bool) -> None:
    [result] = handlers_running(("node_exporter", {"node_exporter_manage_services": True,
                                           "node_exporter_files_written": {"changed_files": changed}}))
    assert ("Restart node exporter" in result) is restarts


@pytest.mark.parametrize(("changed", "reloads_systemd", "restarts"), [
    (["unit"], True, False), (["defaults"], False, True), (["/etc/profile.d/bringup-metrics.sh"], False, False),
    ([], False, False)])
def test_prometheus_server_reloads_systemd_for_its_units_and_restarts_for_its_arguments_only(
        changed: list[str], reloads_systemd: bool, restarts: bool) -> None:
    [result] = handlers_running(("prometheus_server", {"prometheus_server_manage_services": True,
                                               "prometheus_server_files_written": {"changed_files": changed}}))
    assert ("Reload systemd for the scrape-targets units" in result) is reloads_systemd
    assert ("Restart Prometheus" in result) is restarts
