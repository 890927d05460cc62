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
