"""`provision slurm sync` against a real slurmctld with a real slurmd per host (Debian 12's Slurm 22.05.8)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provision.slurm.reasons import parse_reason
from tests.slurm.conftest import SlurmRig, gpu_hosts, make_rig, needs_slurm
from tests.waiting import wait_until

pytestmark = needs_slurm


def test_a_host_that_leaves_golden_is_drained_with_its_reason_once(rig: SlurmRig,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    rc, out = rig.sync(capsys=capsys)
    assert rc == 0 and out["scontrol_calls"] == 0
    rig.store.mark("gpu-r1-03", "failed", reason="xid_79")
    rc, out = rig.sync(capsys=capsys)
    assert rc == 0, out
    node = rig.node("gpu-r1-03")
    assert node["state_flags"] == ["DRAIN"]
    assert str(node["reason"]).startswith("bringup: xid_79 (") and parse_reason(str(node["reason"])).owner == "sync"
    assert rig.node("gpu-r1-04")["state_flags"] == []
    assert rig.slurm_events("gpu-r1-03") == ["slurm_available", "slurm_drained"]
    rc, out = rig.sync(capsys=capsys)  # nothing changed: nothing sent, nothing recorded
    assert rc == 0 and out["scontrol_calls"] == 0 and out["recorded"] == []
    assert rig.slurm_events("gpu-r1-03") == ["slurm_available", "slurm_drained"]


def test_a_host_that_earns_golden_again_is_resumed_but_an_admins_drain_stays(
        rig: SlurmRig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("failed")
    rig.sync(capsys=capsys)
    assert all(rig.node(h)["state_flags"] == ["DRAIN"] for h in ("gpu-r1-01", "gpu-r1-02"))
    # An admin drains gpu-r1-02 for a reason of theirs; both hosts then earn golden again.
    assert rig.scontrol("update", "NodeName=gpu-r1-02", "State=DRAIN", "Reason=PSU swap, ticket 4411").returncode == 0
    for host in ("gpu-r1-01", "gpu-r1-02"):
        rig.store.mark(host, "golden", reason="repaired")
    rc, out = rig.sync(capsys=capsys)
    assert rc == 0
    rig.sync(capsys=capsys)  # right after (the steps' syncs come back to back): nothing recorded lost meanwhile
    assert "slurm_not_responding" not in rig.slurm_events("gpu-r1-01")
    # RESUME leaves the node NOT_RESPONDING until its slurmd registers again (scontrol(1)).
    wait_until("gpu-r1-01 back in service", lambda: rig.node("gpu-r1-01")["state_flags"] == [], every_s=0.3)
    assert rig.node("gpu-r1-01")["state"] == "idle"
    assert rig.node("gpu-r1-02")["state_flags"] == ["DRAIN"]
    assert rig.node("gpu-r1-02")["reason"] == "PSU swap, ticket 4411"
    notes = {d["host"]: d["note"] for d in out["decisions"]}  # type: ignore[union-attr]
    assert "left as it is" in notes["gpu-r1-02"] and "root" in notes["gpu-r1-02"]
    assert rig.slurm_events("gpu-r1-02")[-1] == "slurm_admin_drained"
    # Recorded resuming when the read-back still showed it NOT_RESPONDING, then available once it registered.
    assert rig.slurm_events("gpu-r1-01")[-1] in ("slurm_resuming", "slurm_available")
    rig.sync(capsys=capsys)
    assert rig.slurm_events("gpu-r1-01")[-1] == "slurm_available"


def test_a_health_check_drain_is_recorded_as_the_hosts_failure_with_its_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # slurmd itself runs the HealthCheckProgram (at start and every interval): the agent's fast level replays the
    # captures of an H200 host; gpu-r1-05's capture has an Xid 79.
    replay = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "replay"
    per_node = tmp_path / "replay"
    per_node.mkdir()
    site_hosts = ("gpu-r1-04", "gpu-r1-05")
    for host in site_hosts:
        (per_node / host).symlink_to(replay / ("h200x2-xid79" if host == "gpu-r1-05" else "h200x2-healthy"))
    program = tmp_path / "health-check"
    repo = Path(__file__).resolve().parents[2]
    # slurmd gives the program a bare environment: the lab's SLURM_CONF is set here (a node reads /etc/slurm).
    program.write_text(f"#!/bin/sh\nexport SLURM_CONF={tmp_path / 'slurm' / 'slurm.conf'}\ncd {repo} && exec {os.sys.executable} -m tools.slurm_health_check "  # type: ignore[attr-defined]
                       f"--agent-config {replay / 'expectations-h200x2.json'} --replay {per_node}/{{node}}\n")
    program.chmod(0o755)
    gen = make_rig(tmp_path, monkeypatch, nodes=site_hosts, health_check_program=str(program),
                   health_check_interval_s=2)
    rig = next(gen)
    try:
        for host in site_hosts:
            rig.store.mark(host, "golden", reason="test setup")
        wait_until("the health check's drain", lambda: rig.node("gpu-r1-05")["state_flags"] == ["DRAIN"], every_s=0.3)
        reason = str(rig.node("gpu-r1-05")["reason"])
        assert reason.startswith("bringup-check: xid_79 (") and "gpu_xid" in reason
        assert rig.node("gpu-r1-04")["state_flags"] == []
        rc, out = rig.sync(capsys=capsys)
        assert rc == 0 and out["failed_recorded"] == ["gpu-r1-05"]
        record = rig.store.get("gpu-r1-05")
        assert record.state == "failed" and record.reason == "xid_79"
        assert "gpu_xid" in record.evidence["health_check"] and record.evidence["slurm"]["reason"] == reason
        assert rig.node("gpu-r1-05")["reason"] == reason  # the check's more precise reason is kept
        assert rig.store.get("gpu-r1-04").state == "golden"
    finally:
        gen.close()


def test_a_golden_node_slurm_cannot_reach_is_unknown_not_silently_golden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gen = make_rig(tmp_path, monkeypatch, nodes=("gpu-r1-01", "gpu-r1-02"), slurmd_timeout_s=3)
    rig = next(gen)
    try:
        rig.set_all("golden")
        rig.lab.kill_node("gpu-r1-02")
        wait_until("NOT_RESPONDING", lambda: "NOT_RESPONDING" in rig.node("gpu-r1-02")["state_flags"], every_s=0.3)  # type: ignore[operator]
        rc, out = rig.sync(capsys=capsys)
        assert rc == 0
        assert out["standings"]["gpu-r1-02"] == "not_responding"  # type: ignore[index]
        note = next(d["note"] for d in out["decisions"] if d["host"] == "gpu-r1-02")  # type: ignore[union-attr]
        assert "unknown" in note
        assert rig.slurm_events("gpu-r1-02") == ["slurm_not_responding"]
        assert rig.store.get("gpu-r1-02").state == "golden"  # unknown is not a failure
    finally:
        gen.close()


def test_slurmctld_down_fails_with_one_line_and_changes_nothing_then_a_rerun_finishes(
        rig: SlurmRig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    rig.sync(capsys=capsys)
    rig.store.mark("gpu-r2-01", "failed", reason="pcie_width_x4")
    events = rig.store.event_count()
    rig.lab.stop_controller()
    start = time.monotonic()
    rc, _ = rig.sync(capsys=capsys)
    err = rig.last_err
    assert rc == 1 and time.monotonic() - start < 15
    assert "slurmctld" in err and len(err.strip().splitlines()) == 1
    assert rig.store.event_count() == events
    rig.lab.start_controller()
    rig.lab.wait_registered(gpu_hosts(rig.site))
    rc, _ = rig.sync(capsys=capsys)
    assert rc == 0 and rig.node("gpu-r2-01")["state_flags"] == ["DRAIN"]


def test_a_stalled_slurmctld_is_cut_at_the_sites_deadline(rig: SlurmRig, capsys: pytest.CaptureFixture[str]) -> None:
    pid = rig.lab._procs["slurmctld"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        rc, _ = rig.sync(capsys=capsys)
        err = rig.last_err
        assert rc == 1 and "did not finish within 4 s" in err
        assert time.monotonic() - start < 10
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_sync_killed_after_its_change_is_recorded_by_the_next_run_without_sending_again(
        rig: SlurmRig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    rig.sync(capsys=capsys)
    rig.store.mark("gpu-r1-06", "failed", reason="xid_79")
    rc, plan = rig.sync("--dry-run", capsys=capsys)
    wanted = next(d["reason"] for d in plan["decisions"] if d["host"] == "gpu-r1-06")  # type: ignore[union-attr]
    assert rig.node("gpu-r1-06")["state_flags"] == []  # a dry run changes nothing
    # What a sync killed right after its scontrol call leaves behind: the drain made, nothing recorded.
    assert rig.scontrol("update", "NodeName=gpu-r1-06", "State=DRAIN", f"Reason={wanted}").returncode == 0
    rc, out = rig.sync(capsys=capsys)
    assert rc == 0 and out["scontrol_calls"] == 0 and out["recorded"] == ["gpu-r1-06"]
    assert rig.slurm_events("gpu-r1-06")[-1] == "slurm_drained"


def test_a_sync_killed_between_its_scontrol_call_and_its_record_is_reconciled_by_the_next(
        rig: SlurmRig, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    rig.sync(capsys=capsys)
    rig.store.mark("gpu-r2-06", "failed", reason="ecc_uncorrected")
    # An scontrol that makes the change, then kills the sync that ran it (kill -9: no handler, no record).
    tools = tmp_path / "killing-tools"
    tools.mkdir()
    (tools / "sinfo").symlink_to(shutil.which("sinfo") or "/usr/bin/sinfo")
    (tools / "scontrol").write_text(f'#!/bin/sh\n{shutil.which("scontrol")} "$@"\nkill -9 $PPID\n')
    (tools / "scontrol").chmod(0o755)
    site_file = rig.site.path
    original = site_file.read_text()
    site_file.write_text(original.replace("  timeout_s: 4\n", f"  timeout_s: 4\n  commands_dir: {tools}\n"))
    killed = subprocess.run([sys.executable, "-m", "provision", "slurm", "sync", "--site", str(site_file)],
                            capture_output=True, text=True, timeout=60, check=False)
    site_file.write_text(original)
    assert killed.returncode == -signal.SIGKILL
    assert rig.node("gpu-r2-06")["state_flags"] == ["DRAIN"]  # the change was made
    assert rig.slurm_events("gpu-r2-06") == ["slurm_available"]  # and not recorded
    rc, out = rig.sync(capsys=capsys)
    assert rc == 0 and out["reconciled"] == ["gpu-r2-06"] and out["scontrol_calls"] == 0
    assert rig.slurm_events("gpu-r2-06") == ["slurm_available", "slurm_drained"]
    rc, out = rig.sync(capsys=capsys)
    assert out["reconciled"] == [] and out["recorded"] == []


def test_hostile_reason_text_is_stored_and_shown_escaped(rig: SlurmRig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.set_all("golden")
    hostile = 'drained "by" me\x1b]0;pwned\x07 [/bold]\nsecond line'
    assert rig.scontrol("update", "NodeName=gpu-r1-07", "State=DRAIN", f"Reason={hostile}").returncode == 0
    capsys.readouterr()
    from provision.cli import main

    assert main(["slurm", "sync", "--site", str(rig.site.path)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown
    stored = rig.store.history("gpu-r1-07")[-1].evidence["slurm"]["reason"]
    assert "\x1b" not in stored and "\\x1b" in stored


def test_a_golden_host_slurm_does_not_know_fails_the_sync_after_the_others_are_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gen = make_rig(tmp_path, monkeypatch, nodes=("gpu-r1-01", "gpu-r1-02"))
    rig = next(gen)
    try:
        rig.set_all("golden")
        rig.store.mark("gpu-r1-03", "golden", reason="test setup")
        rig.store.mark("gpu-r1-02", "failed", reason="xid_79")
        rc, _ = rig.sync(capsys=capsys)
        err = rig.last_err
        assert rc == 2 and "gpu-r1-03" in err and "Slurm does not know" in err
        assert rig.node("gpu-r1-02")["state_flags"] == ["DRAIN"]
        assert rig.node("gpu-r1-01")["state_flags"] == []
    finally:
        gen.close()
