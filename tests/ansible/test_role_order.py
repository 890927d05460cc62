"""Ordering the site's roles depends on, read from the role and playbook files.

The test hosts cannot restart openibd or load modules, so the playbook runs cannot show the order in
which they happen on a real host; these tests pin the tasks that make it so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _tasks(path: Path) -> list[dict[str, Any]]:
    """A task file's tasks with blocks flattened."""
    out: list[dict[str, Any]] = []
    for task in _yaml(path):
        out.extend(_flatten(task))
    return out


def _flatten(task: dict[str, Any]) -> list[dict[str, Any]]:
    if "block" not in task:
        return [task]
    return [t for inner in task["block"] for t in _flatten(inner)]


def _site_role_order() -> list[str]:
    play = next(p for p in _yaml(REPO / "playbooks" / "site.yml") if p["name"] == "Configure the GPU hosts")
    block = next(t for t in play["tasks"] if "block" in t)["block"]
    return [t["ansible.builtin.import_role"]["name"] for t in block if "ansible.builtin.import_role" in t]


def test_openibd_restarts_at_the_end_of_the_ofed_role_before_nvidia_peermem_loads() -> None:
    order = _site_role_order()
    assert order.index("ofed") < order.index("nvidia_driver") < order.index("gpudirect_rdma")
    tasks = _yaml(ROLES / "ofed" / "tasks" / "main.yml")
    # the role's last task runs the openibd restart its package task notified, not the end of the play
    assert tasks[-1].get("ansible.builtin.meta") == "flush_handlers"
    handlers = _yaml(ROLES / "ofed" / "handlers" / "main.yml")
    assert [h["name"] for h in handlers] == ["Restart openibd", "Record that OFED changed"]
    # the fact later roles read (nvidia_driver's DKMS rebuild) is set by the same notification, by ofed itself
    assert handlers[1]["listen"] == "Restart openibd"
    assert handlers[1]["ansible.builtin.set_fact"] == {"ofed_changed": True}
    defaults = _yaml(ROLES / "nvidia_driver" / "defaults" / "main.yml")
    assert defaults["nvidia_driver_rebuild_dkms"] == "{{ ofed_changed | default(false) }}"


def test_nvidia_peermem_loads_at_boot_after_openibd_not_from_modules_load_d() -> None:
    tasks = _tasks(ROLES / "gpudirect_rdma" / "tasks" / "main.yml")
    writes = [t for t in tasks if "ansible.builtin.copy" in t or "ansible.builtin.template" in t]
    assert all("modules-load.d" not in str(t) for t in writes)
    removed = [t["ansible.builtin.file"]["path"] for t in tasks if "ansible.builtin.file" in t]
    assert removed == ["/etc/modules-load.d/nvidia-peermem.conf"]
    defaults = _yaml(ROLES / "gpudirect_rdma" / "defaults" / "main.yml")
    assert "openibd.service" in defaults["gpudirect_rdma_after_units"]
    unit = (ROLES / "gpudirect_rdma" / "templates" / "nvidia-peermem.service.j2").read_text()
    assert "After={{ gpudirect_rdma_after_units | join(' ') }}" in unit and "WantedBy=multi-user.target" in unit


def test_driver_reboot_runs_handlers_first_goes_in_batches_and_checks_the_loaded_driver_after() -> None:
    tasks = _yaml(ROLES / "nvidia_driver" / "tasks" / "loaded.yml")
    names = [t["name"] for t in tasks]
    reboot_at = next(i for i, t in enumerate(tasks) if "ansible.builtin.reboot" in t)
    flush_at = next(i for i, t in enumerate(tasks) if t.get("ansible.builtin.meta") == "flush_handlers")
    refuse_at = names.index("Stop when a reboot is needed but not allowed")
    assert refuse_at < flush_at < reboot_at
    assert tasks[reboot_at]["throttle"] == "{{ nvidia_driver_reboot_batch }}"
    defaults = _yaml(ROLES / "nvidia_driver" / "defaults" / "main.yml")
    assert 1 <= defaults["nvidia_driver_reboot_batch"] <= 4
    after = tasks[reboot_at + 1]
    assert after["when"] == "nvidia_driver_needs_reboot"
    checks = [t for t in after["block"] if "ansible.builtin.fail" in t]
    assert len(checks) == 1 and "not the installed" in checks[0]["ansible.builtin.fail"]["msg"]


def test_ofed_and_gpudirect_run_only_on_hosts_whose_class_has_infiniband_hcas() -> None:
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    for role, var in (("ofed", "ofed_enabled"), ("gpudirect_rdma", "gpudirect_rdma_enabled")):
        expr = _yaml(ROLES / role / "defaults" / "main.yml")[var]
        cases = [({"bringup_hardware": {"ib": {"hca_count": 8}}}, "True"),
                 ({"bringup_hardware": {"ib": {"hca_count": 0}}}, "False"),
                 ({"bringup_hardware": {"ib": None}}, "False"),  # a class without an ib section
                 ({"bringup_hardware": {}}, "False"), ({}, "False")]
        for context, expected in cases:
            assert env.from_string(expr).render(**context) == expected, (role, context)
        top = _yaml(ROLES / role / "tasks" / "main.yml")
        gated = [t for t in top if "block" in t]
        assert len(gated) == 1 and gated[0]["when"] == f"{var} | bool", role
        assert all("block" in t or t.get("ansible.builtin.meta") == "flush_handlers" for t in top), role
