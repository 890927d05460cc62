"""A job's alerts reach the suspect hosts' state-store history (`provision anomalies`, which the supervisor
runs after each attempt), once each; labels do not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from provision.cli import main
from provision.state import StateStore
from tests.ship.conftest import lab_site
from training.launcher import Host
from training.supervisor import Supervisor


def test_alerts_go_to_the_suspect_hosts_history_once_and_labels_do_not(tmp_path: Path) -> None:
    site_file, _ = lab_site(tmp_path / "site", 4)
    db = tmp_path / "state.db"
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"time": 1.0, "kind": "straggler", "alert": True, "hosts": ["gpu-0002"], "steps": [6, 99],
             "level": 0.1, "evidence": {"rank": 1, "busy_ratio": 9.6}},
            {"time": 2.0, "kind": "checkpoint", "alert": False, "hosts": [], "steps": [100], "level": 1.0}]
    (run / "anomalies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["status", "--site", str(site_file), "--db", str(db)]) == 0
    sup = Supervisor([Host("gpu-0001", 1)], [], run, lambda h: {},
                     anomaly_cmd=f"{sys.executable} -m provision anomalies --site {site_file} --db {db} --run-dir {{run_dir}}")
    sup._record_anomalies()
    sup._record_anomalies()  # a second attempt's call records nothing new
    store = StateStore(db)
    notes = [e for e in store.history("gpu-0002") if e.reason == "training_anomaly"]
    assert len(notes) == 1 and notes[0].evidence["kind"] == "straggler"
    assert notes[0].evidence["evidence"] == {"rank": 1, "busy_ratio": 9.6} and notes[0].command == "anomalies"
    assert not any(e.reason == "training_anomaly" for e in store.history("gpu-0001"))


def test_a_link_diagnosis_names_the_host_whose_hca_counters_rose_in_the_stores_burn_in_history(tmp_path: Path) -> None:
    """No counters passed by anyone: the supervisor's `--port-evidence` call reads the hosts' hca_guids facts
    and the latest burn-in run's port deltas (fabric/burnin/history.py) into RUN/evidence.json, the job's
    classifier names that host, and the recorded alert carries its ports."""
    from fabric.burnin.history import History, PortRow
    from tests.training.test_diagnosis import STEP, series
    from training.diagnosis.classify import Expected, classify
    from training.diagnosis.watch import read_evidence

    site_file, _ = lab_site(tmp_path / "site", 4)
    db = tmp_path / "state.db"
    assert main(["status", "--site", str(site_file), "--db", str(db)]) == 0
    store = StateStore(db, actor="test")
    for i, guid in ((1, "0x0c42a10300a9b001"), (2, "0x0c42a10300a9b002")):
        store.set_facts(f"gpu-000{i}", command="test", hca_guids=(guid,))
    history = History(store)
    run_id, _ = history.open_run({"stages": [[]]}, 60, False)
    history.finish_stage(run_id, 0, 0.0, [], [PortRow(0, "0c42a10300a9b002", 1, "symbol_errors", 412, "ok", ""),
                                             PortRow(0, "0c42a10300a9b001", 1, "symbol_errors", 0, "ok", "")])
    run = tmp_path / "run"
    sup = Supervisor([Host("gpu-0001", 1), Host("gpu-0002", 1)], [], run, lambda h: {},
                     anomaly_cmd=f"{sys.executable} -m provision anomalies --site {site_file} --db {db} --run-dir {{run_dir}}")
    sup._port_evidence(sup.hosts)
    evidence = read_evidence(run)
    assert evidence.port_counters == {"gpu-0002": {"symbol_errors": 412}}
    found = [a for a in classify(series(shape=lambda i: 0.7), Expected(STEP), None, evidence) if a.alert]
    assert [(a.kind, a.hosts) for a in found] == [("degraded_link_or_cpu", ("gpu-0002",))]
    row = {"time": 3.0, "kind": found[0].kind, "alert": True, "hosts": list(found[0].hosts), "steps": [6, 500],
           "level": 0.7, "evidence": found[0].evidence}
    (run / "anomalies.jsonl").write_text(json.dumps(row) + "\n")
    sup._record_anomalies()
    note = next(e for e in StateStore(db).history("gpu-0002") if e.reason == "training_anomaly")
    assert note.evidence["hca_ports"]["ports"] == [{"guid": "0c42a10300a9b002", "port": 1, "counter": "symbol_errors",
                                                     "delta": 412, "stage": 0}]
    assert note.evidence["hca_ports"]["burnin_run"] == run_id
