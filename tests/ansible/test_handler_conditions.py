"""Handlers notified by one task that writes several files run only for the file they concern.

The test hosts cannot restart services (their inventory turns service management off), so the
playbook runs never reach these conditions; here each handler's `when` is evaluated by Ansible's own
templating against the names the roles' file-writing tasks report in `changed_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROLES = Path(__file__).resolve().parents[2] / "roles"


def _yaml(path: Path) -> Any:
    return DataLoader().load_from_file(str(path), trusted_as_template=True)


def _running(role: str, variables: dict[str, Any]) -> set[str]:
    templar = Templar(loader=DataLoader(), variables=variables)
    handlers = _yaml(ROLES / role / "handlers" / "main.yml")
    return {h["name"] for h in handlers if "when" in h and templar.evaluate_conditional(h["when"])}


def _file_names(tasks: list[dict[str, Any]]) -> list[str]:
    task = next(t for t in tasks if "managed_files" in t)
    return [f.get("name") or f["dest"] for f in task["managed_files"]["files"]]


def test_common_declares_the_file_names_its_handlers_look_for() -> None:
    names = [f["name"] for f in _yaml(ROLES / "common" / "vars" / "main.yml")["common_files"]]
    assert sorted(names) == ["chrony", "governor", "limits", "sysctl", "systemd_limits"]


@pytest.mark.parametrize(("changed", "expected"), [
    (["chrony"], {"Restart chrony"}),
    (["governor"], {"Reload systemd", "Apply the CPU governor"}),
    (["sysctl"], {"Apply kernel parameters"}),
    (["limits"], set()),  # PAM limits apply at the next login: nothing to restart
    (["systemd_limits"], {"Reload systemd"}),
    (["chrony", "sysctl"], {"Restart chrony", "Apply kernel parameters"}),
    ([], set()),
])
def test_common_runs_only_the_handlers_of_the_files_that_changed(changed: list[str], expected: set[str]) -> None:
    live = {"common_manage_services": True, "common_apply_runtime": True, "common_files_changed": changed}
    assert _running("common", live) == expected


def test_common_handlers_stay_off_where_services_and_runtime_are_not_managed() -> None:
    off = {"common_manage_services": False, "common_apply_runtime": False,
           "common_files_changed": ["chrony", "governor", "sysctl", "limits", "systemd_limits"]}
    assert _running("common", off) == set()


def test_health_agent_reloads_systemd_when_a_unit_changed_not_when_only_the_expectations_did() -> None:
    files = _file_names(_yaml(ROLES / "health_agent" / "tasks" / "main.yml"))
    units = [n for n in files if n == "unit"]
    others = [n for n in files if n != "unit"]
    assert len(units) == 2 and len(others) == 1
    others = ["/etc/bringup/health.json"]  # the expectations file reports its dest (a template in the task)

    def running(changed: list[str]) -> bool:
        variables = {"health_agent_manage_services": True, "health_agent_files_written": {"changed_files": changed}}
        return "Reload systemd for the health units" in _running("health_agent", variables)

    assert running(["unit"]) and running([*others, "unit"])
    assert not running(others) and not running([])


def test_node_exporter_restarts_when_its_arguments_changed_only() -> None:
    def running(changed: list[str]) -> bool:
        variables = {"node_exporter_manage_services": True, "node_exporter_files_written": {"changed_files": changed}}
        return "Restart node exporter" in _running("node_exporter", variables)

    assert running(["/etc/default/prometheus-node-exporter"])
    assert not running([])
