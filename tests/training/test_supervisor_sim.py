"""The supervisor's health step for real: `provision health --site S` over the SSH host simulator
(sim/sshhosts replaying captured H200 outputs; gpu-0002 replays an Xid 79, critical), on the job's hosts
and the spares, and the restart on the golden ones plus a spare at the same world size."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from provision.state import StateStore
from sim.sshhosts.harness import SshLab
from tests.health.conftest import make_sim_site
from tests.training.test_supervisor import ScriptedSupervisor, _checkpoint
from training.launcher import Host
from training.supervisor import provision_health


def test_a_host_gone_critical_is_replaced_by_a_golden_spare_after_provision_health_over_ssh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site_file, faults = make_sim_site(tmp_path / "site", 6, {"gpu-0002": {"fixture": "h200x2-xid79"}})
    db = tmp_path / "state.db"
    with SshLab(site_file, faults, tmp_path / "lab") as lab:
        for k, v in lab.env.items():
            monkeypatch.setenv(k, v)
        from provision.cli import main

        assert main(["status", "--site", str(site_file), "--db", str(db)]) == 0
        store = StateStore(db, actor="test")
        for i in range(1, 7):
            store.mark(f"gpu-{i:04d}", "golden", reason="test setup")
        health = provision_health(f"{sys.executable} -m provision health --site {site_file} --db {db} "
                                  "--hosts {hosts} --level fast --json", timeout_s=120,
                                  golden_template=f"{sys.executable} -m provision golden --site {site_file} --db {db} "
                                  "--json")
        run = tmp_path / "run"
        _checkpoint(run, 30, ranks=4)
        sup = ScriptedSupervisor([Host(f"gpu-{i:04d}", 1) for i in range(1, 5)], [], run, health,
                                 spares=[Host("gpu-0005", 1), Host("gpu-0006", 1)])
        sup.script = [{"gpu-0002": "exit 1"}, {}]
        assert sup.run() == 0
    events = [json.loads(line) for line in (run / "supervisor.jsonl").read_text().splitlines()]
    restart = events[1]
    assert restart["dropped"] == {"gpu-0002": "critical"} and restart["added"] == ["gpu-0005"]
    assert events[2]["hosts"] == ["gpu-0001", "gpu-0003", "gpu-0004", "gpu-0005"]
    assert restart["resume_step"] == 30 and restart["verdicts"]["gpu-0006"] == "golden"
    assert "gpu_xid" in json.dumps(json.loads((run / "evidence.json").read_text())["health"]["gpu-0002"])
    assert store.get("gpu-0002").state.value == "failed"
