"""The SQLite state store: validated moves, history, overrides, concurrency and crash safety."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from provision.errors import IllegalTransition, StateError, UnknownHost
from provision.state import Change, State, StateStore
from provision.state.redact import redact_text

REPO = Path(__file__).resolve().parents[2]
HOSTS = [(f"gpu-{i:03d}", f"r{i // 8}") for i in range(256)]


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "state" / "site.db", actor="tester")
    s.sync_site(HOSTS[:4])
    return s


def test_sync_declares_new_hosts_once(store: StateStore) -> None:
    assert store.sync_site(HOSTS[:6]) == 2
    assert store.sync_site(HOSTS[:6]) == 0
    assert [r.state for r in store.hosts()] == [State.declared] * 6
    assert store.history("gpu-000")[0].to_state is State.declared


def test_hosts_dropped_from_the_site_are_kept_but_flagged(store: StateStore) -> None:
    store.sync_site(HOSTS[1:4])
    flagged = {r.hostname: r.in_site for r in store.hosts()}
    assert flagged["gpu-000"] is False and flagged["gpu-001"] is True


def test_transition_records_an_event_with_evidence(store: StateStore) -> None:
    out = store.transition("gpu-000", State.bmc_reachable, command="harvest-macs", evidence={"model": "R650"})
    assert out.changed and out.before is State.declared and out.after is State.bmc_reachable
    last = store.history("gpu-000")[-1]
    assert (last.from_state, last.to_state, last.command, last.actor) == (
        State.declared, State.bmc_reachable, "harvest-macs", "tester")
    assert last.evidence == {"model": "R650"}


def test_rerun_of_a_reached_state_is_a_no_op(store: StateStore) -> None:
    store.transition("gpu-000", "bmc_reachable", command="x")
    before = store.event_count()
    out = store.transition("gpu-000", "bmc_reachable", command="x")
    assert not out.changed and store.event_count() == before


def test_illegal_jump_is_refused_and_nothing_is_written(store: StateStore) -> None:
    before = store.event_count()
    with pytest.raises(IllegalTransition, match="gpu-000: declared → deployed skips"):
        store.transition("gpu-000", State.deployed, command="x")
    assert store.get("gpu-000").state is State.declared and store.event_count() == before


def test_failure_needs_a_machine_readable_reason(store: StateStore) -> None:
    with pytest.raises(StateError, match="machine-readable reason"):
        store.fail("gpu-000", "BMC said no!", command="x")
    store.fail("gpu-000", "bmc_auth", command="harvest-macs", evidence={"status": 401})
    rec = store.get("gpu-000")
    assert (rec.state, rec.reason, rec.resume_from, rec.evidence) == (
        State.failed, "bmc_auth", State.declared, {"status": 401})


def test_failed_host_resumes_where_it_stopped(store: StateStore) -> None:
    store.transition("gpu-000", "bmc_reachable", command="x")
    store.fail("gpu-000", "no_pxe_nic", command="x")
    store.fail("gpu-000", "no_pxe_nic", command="x")  # a re-failure keeps where it failed
    assert store.get("gpu-000").resume_from is State.bmc_reachable
    with pytest.raises(IllegalTransition):
        store.transition("gpu-000", State.pxe_armed, command="x")
    store.transition("gpu-000", State.macs_harvested, command="x")
    rec = store.get("gpu-000")
    assert rec.state is State.macs_harvested and rec.reason is None and rec.resume_from is None


def test_override_is_recorded_as_such(store: StateStore) -> None:
    with pytest.raises(StateError, match="--reason"):
        store.mark("gpu-001", State.deployed, reason="  ")
    store.mark("gpu-001", State.deployed, reason="already installed by hand")
    last = store.history("gpu-001")[-1]
    assert last.override and last.reason == "already installed by hand" and last.to_state is State.deployed


def test_unknown_host_is_a_clear_error(store: StateStore) -> None:
    with pytest.raises(UnknownHost, match="'nope'"):
        store.transition("nope", State.bmc_reachable, command="x")


def test_batch_is_all_or_nothing(store: StateStore) -> None:
    with pytest.raises(IllegalTransition):
        store.transition_many([
            Change("gpu-000", State.bmc_reachable, "x"),
            Change("gpu-001", State.golden, "x"),
        ])
    assert store.get("gpu-000").state is State.declared


def test_evidence_secrets_are_masked(store: StateStore) -> None:
    store.fail("gpu-002", "bmc_auth", command="x",
               evidence={"headers": {"Authorization": "Basic cm9vdDpodW50ZXIy"}, "X-Auth-Token": "abc"})
    raw = (store.path).read_bytes() + Path(str(store.path) + "-wal").read_bytes()
    assert b"cm9vdDpodW50ZXIy" not in raw and b'"abc"' not in raw
    assert store.get("gpu-002").evidence["headers"]["Authorization"] == "********"


def test_secrets_inside_evidence_text_are_masked_and_ordinary_assignments_kept(store: StateStore) -> None:
    # A bisect job's command line and a tool's echoed request, as they reach the evidence.
    command = "HF_TOKEN=hf_abc123 WANDB_API_KEY=wb-xyz torchrun --nnodes {nnodes} train.py --password hunter2"
    echoed = 'curl -H "Authorization: Bearer eyJhbGc.payload" -H "X-Auth-Token: 7f3e9a"'
    kept = "NCCL_DEBUG=INFO passes=3 tokens_per_step=1000 --hosts a,b"
    store.fail("gpu-003", "bisect_culprit", command="x", evidence={"command": command, "runs": [echoed, kept]})
    raw = (store.path).read_bytes() + Path(str(store.path) + "-wal").read_bytes()
    for secret in (b"hf_abc123", b"wb-xyz", b"hunter2", b"eyJhbGc", b"7f3e9a"):
        assert secret not in raw
    evidence = store.get("gpu-003").evidence
    assert evidence["command"] == ("HF_TOKEN=******** WANDB_API_KEY=******** torchrun --nnodes {nnodes} train.py "
                                   "--password ********")
    assert evidence["runs"] == ['curl -H "Authorization: ********" -H "X-Auth-Token: ********"', kept]


@pytest.mark.parametrize(("text", "masked"), [
    ('HF_TOKEN="hf_abc" python x', 'HF_TOKEN="********" python x'),
    ("--password 'hunter2' --hosts a", "--password '********' --hosts a"),
    ('{"Authorization": "Basic cm9vdDpw", "Id": "x"}', '{"Authorization": "********", "Id": "x"}'),
    ("AWS_SECRET_ACCESS_KEY=abc aws s3 ls", "AWS_SECRET_ACCESS_KEY=******** aws s3 ls"),
    ("git clone https://ops:pw123@git.example/x", "git clone https://ops:********@git.example/x"),
    ("curl -u admin:pw123 https://bmc/redfish", "curl -u ******** https://bmc/redfish"),
    ("Set-Cookie: sid=abc; Path=/", "Set-Cookie: ********"),
    ("power_pass=bmcpw", "power_pass=********"),
])
def test_quoted_json_url_and_cookie_secrets_in_text_are_masked(text: str, masked: str) -> None:
    assert redact_text(text) == masked


@pytest.mark.parametrize("text", [
    "Speculative Store Bypass: Mitigation: Speculative Store Bypass disabled via prctl",  # a real boot line
    "Compass: 3", "passes=3 tokens_per_step=1000", '"passed": true', "mpirun -np 8 -x NCCL_IB_HCA=mlx5_0 python",
])
def test_ordinary_text_with_look_alike_names_is_kept(text: str) -> None:
    assert redact_text(text) == text


def test_keys_are_masked_by_their_words_not_by_substrings(store: StateStore) -> None:
    evidence = {"passed": False, "checks_passed": 3, "tokens_per_s": 5.0, "apiKey": "k", "power_pass": "p",
                "X-Auth-Token": "t"}
    store.fail("gpu-001", "bisect_culprit", command="x", evidence=evidence)
    assert store.get("gpu-001").evidence == {"passed": False, "checks_passed": 3, "tokens_per_s": 5.0,
                                             "apiKey": "********", "power_pass": "********",
                                             "X-Auth-Token": "********"}


def test_a_database_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateError, match=r"not a bringup state store|locked or unreadable"):
        StateStore(bad)


def test_concurrent_asyncio_writers_lose_nothing(tmp_path: Path) -> None:
    s = StateStore(tmp_path / "c.db")
    s.sync_site(HOSTS)
    start = s.event_count()

    async def walk(host: str) -> None:
        for target in (State.bmc_reachable, State.macs_harvested, State.pxe_armed):
            await s.atransition(host, target, command="fanout", evidence={"host": host})

    async def main() -> None:
        await asyncio.gather(*(walk(h) for h, _ in HOSTS))

    asyncio.run(main())
    assert s.event_count() - start == 3 * len(HOSTS)  # 768 concurrent transitions
    assert {r.state for r in s.hosts()} == {State.pxe_armed}
    for host, _ in HOSTS[:: 37]:
        assert [e.to_state for e in s.history(host)] == [
            State.declared, State.bmc_reachable, State.macs_harvested, State.pxe_armed]
    s.close()


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    s = StateStore(db)
    s.sync_site(HOSTS[:64])
    script = textwrap.dedent("""
        import sys
        from provision.state import StateStore
        s = StateStore(sys.argv[1])
        lo, hi = int(sys.argv[2]), int(sys.argv[3])
        for i in range(lo, hi):
            for t in ("bmc_reachable", "macs_harvested"):
                s.transition(f"gpu-{i:03d}", t, command="proc")
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(db), str(lo), str(lo + 16)], cwd=REPO)
        for lo in range(0, 64, 16)
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert s.in_state(State.macs_harvested) == [h for h, _ in HOSTS[:64]]
    assert s.event_count() == 64 * 3


def test_kill_9_mid_run_loses_no_committed_event(tmp_path: Path) -> None:
    """A writer is killed with SIGKILL while committing; every event it reported committed is there."""
    db = tmp_path / "k.db"
    s = StateStore(db)
    s.sync_site(HOSTS)
    s.close()
    script = textwrap.dedent("""
        import sys
        from provision.state import StateStore, State
        s = StateStore(sys.argv[1])
        for i in range(256):
            for t in (State.bmc_reachable, State.macs_harvested, State.pxe_armed, State.enlisted):
                s.transition(f"gpu-{i:03d}", t, command="crash", evidence={"pad": "x" * 2000})
                print(f"gpu-{i:03d} {t.value}", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, str(db)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    committed: list[str] = []
    deadline = time.monotonic() + 60
    while len(committed) < 150 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        committed.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(committed) >= 150, "writer did not get far enough before the kill"

    s = StateStore(db)
    integrity = s._conn().execute("PRAGMA integrity_check").fetchone()[0]
    assert integrity == "ok"
    for entry in committed:
        host, state = entry.split()
        assert any(e.to_state.value == state for e in s.history(host)), entry
    # the store is consistent: each host's row matches the last event of its history
    for rec in s.hosts():
        assert s.history(rec.hostname)[-1].to_state is rec.state
    json.dumps([r.hostname for r in s.hosts()])
