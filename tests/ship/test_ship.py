"""`provision ship` over the SSH host simulator: a tree (the controller sends 2 copies, hosts serve the
rest), every host's checksum and versions verified, the prefix relocated, env_shipped in each history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.ship.fanout import ShipConfig, check_reply
from provision.ship.tree import CONTROLLER, plan_tree
from provision.state import StateStore
from provision.state.intents import Ask, begin_in
from sim.sshhosts.harness import SshLab
from tests.ship.conftest import LAB_PUSH, lab_site


def test_the_tree_doubles_the_holders_each_round_from_two_seeds() -> None:
    rounds = plan_tree([f"h{i}" for i in range(512)], seeds=2)
    assert [len(r) for r in rounds] == [2, 2, 4, 8, 16, 32, 64, 128, 256]
    assert sum(c.source == CONTROLLER for r in rounds for c in r) == 2
    have: set[str] = set()
    for r in rounds:
        assert all(c.source == CONTROLLER or c.source in have for c in r)
        have |= {c.target for c in r}
    assert len(have) == 512


def test_a_reply_with_another_checksum_or_version_is_refused(packed: Path) -> None:
    man = json.loads((packed / "bringup-env.manifest.json").read_text())
    summary = json.dumps({"env_id": man["env_id"], "versions": man["versions"]})
    assert check_reply(f"{man['archive_sha256']}\n{summary}\n", man)[0]
    assert "archive checksum" in check_reply(f"{'0' * 64}\n{summary}\n", man)[1]
    other = json.dumps({"env_id": man["env_id"], "versions": {**man["versions"], "torch": "2.12.0"}})
    assert "expected" in check_reply(f"{man['archive_sha256']}\n{other}\n", man)[1]


def test_ship_to_golden_hosts_as_a_tree_verifies_relocates_and_records(
        packed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli import main

    site_file, faults = lab_site(tmp_path / "site", 9, {"gpu-0008": {"endpoint": "refuse"}})
    db = tmp_path / "state.db"
    with SshLab(site_file, faults, tmp_path / "lab") as lab:
        for k, v in lab.env.items():
            monkeypatch.setenv(k, v)
        assert main(["status", "--site", str(site_file), "--db", str(db)]) == 0
        capsys.readouterr()
        store = StateStore(db, actor="test")
        for i in range(1, 10):
            store.mark(f"gpu-{i:04d}", "golden", reason="test setup")
        with store.transaction() as tx:  # a power cycle asked of gpu-0009 and not recorded: not shipped to
            begin_in(tx, Ask("gpu-0009", "bmc", "https://bmc", "reset ForceOff", "Off", "power cycle"))
        dest = str(tmp_path / "hosts" / "{host}")
        rc = main(["ship", "--site", str(site_file), "--db", str(db), "--env", str(packed), "--hosts", "golden",
                   "--dest", dest, "--push", LAB_PUSH, "--encoding", "base64", "--deep", "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert rc == 2 and out["ok"] == 7 and list(out["failed"]) == ["gpu-0008"] and list(out["held_back"]) == ["gpu-0009"]
    assert not (tmp_path / "hosts" / "gpu-0009").exists()
    assert out["controller_copies"] <= 3 and out["rounds"] == 3  # 2 seeds; a refused host's child re-seeded
    man = json.loads((packed / "bringup-env.manifest.json").read_text())
    host_dir = tmp_path / "hosts" / "gpu-0003"
    assert (host_dir / "env" / "bin" / "torchrun").read_text().startswith(f"#!{host_dir}/env/bin/python")
    hist = store.history("gpu-0005")[-1]
    assert (hist.reason, hist.from_state, hist.to_state) == ("env_shipped", hist.to_state, hist.to_state)
    assert hist.evidence["env_id"] == man["env_id"] and hist.evidence["source"].startswith("gpu-")
    assert store.history("gpu-0008")[-1].reason == "env_ship_failed"


def test_the_default_destination_and_raw_copies_are_what_a_real_site_gets() -> None:
    cfg = ShipConfig()
    assert cfg.encoding == "raw" and "ssh -o BatchMode=yes" in cfg.push and cfg.dest.startswith("/opt/")
