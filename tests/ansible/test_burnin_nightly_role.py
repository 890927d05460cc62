"""`playbooks/controller.yml` (roles/burnin_nightly) on a Debian test host standing in for the controller:
the timer and the service it runs, a second run and a --check run that change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ansible.conftest import REPO, enabled, run_playbook, ssh

pytestmark = pytest.mark.slow

PLAYBOOK = REPO / "playbooks" / "controller.yml"
HOST = "gpu-r1-04"
VARS = ["-e", json.dumps({"burnin_nightly_hosts": HOST, "burnin_nightly_manage_services": False,
                          "burnin_nightly_budget": "90m", "burnin_nightly_in_use_hostfile": "/etc/bringup/job.hosts"})]


def test_controller_playbook_installs_the_nightly_burn_in_timer_idempotently(lab: Any) -> None:
    first = run_playbook(lab.inventory, PLAYBOOK, *VARS)
    assert first.rc == 0, first.output[-4000:]
    assert first.recap[HOST]["changed"] > 0 and first.recap[HOST]["failed"] == 0
    host = ssh(lab, HOST)
    service = host.file("/etc/systemd/system/bringup-burnin-nightly.service")
    assert service.mode == 0o644
    assert service.contains("ExecStart=/opt/bringup/venv/bin/fabric burnin nightly --site /etc/bringup/site.yml "
                            "--budget 90m --cycle 7 --duration 600 --in-use /etc/bringup/job.hosts --json")
    assert service.contains("--prom /var/lib/node_exporter/textfile_collector/bringup_burnin.prom")
    assert host.file("/etc/systemd/system/bringup-burnin-nightly.timer").contains("OnCalendar=\\*-\\*-\\* 01:00:00")
    assert enabled(host, "bringup-burnin-nightly.timer")
    again = run_playbook(lab.inventory, PLAYBOOK, *VARS)
    assert again.rc == 0 and again.recap[HOST]["changed"] == 0, again.output[-4000:]
    check = run_playbook(lab.inventory, PLAYBOOK, *VARS, "--check", "--diff")
    assert check.rc == 0 and check.recap[HOST]["changed"] == 0, check.output[-4000:]
