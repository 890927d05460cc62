"""Intents (provision/state/intents.py): on disk before the call they announce, closed by the host's next move in
the move's own transaction (or not at all), runs told alive from dead by pid and start time, peer text stored
redacted, and a host with an open intent neither promoted golden nor in the golden hostfile."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from provision.cli import main
from provision.cli.step_view import render_failures, result_json
from provision.errors import IllegalTransition
from provision.golden.step import promote_golden
from provision.hostfiles import golden_hosts
from provision.site import load_site
from provision.site.index import load_index
from provision.site.model import Host
from provision.state import State, StateStore
from provision.state.intent_table import start_time
from provision.state.intents import (
    Ask,
    Outcome,
    begin_in,
    close,
    closed,
    hosts_in_flight,
    open_intents,
    run_alive,
    this_run,
)
from provision.state.secret_values import forget_all, hold
from provision.steps.recorder import Recorder
from provision.steps.runner import HostResult, Recording, RunLimits, Step, run_step
from provision.steps.spec import StepSpec
from tests.redfish.simlab import write_site

SPEC = StepSpec(name="acting", run_by="test", summary="asks a peer, then records", takes=(State.declared,),
                moves_to=(State.bmc_reachable,))


class ActingStep(Step):
    """Asks a (pretend) peer for a change per host, then records the host's move."""

    spec: ClassVar[StepSpec] = SPEC
    store: StateStore

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.seen_before_call: dict[str, list[str]] = {}

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        await rec.intend(host.hostname, "bmc", "https://bmc", "reset On", "On")
        # What another process sees at the moment the call would go out: the intent, committed.
        with StateStore(self.store.path) as other:
            self.seen_before_call[host.hostname] = [i.action for i in open_intents(other, hosts=[host.hostname])]
        await rec.move(host.hostname, State.bmc_reachable, {"power_state": "On"})
        return {}


def _host(name: str) -> Host:
    return Host.model_validate({"hostname": name, "u": 1, "role": "gpu", "class": "c", "rack": "r1",
                                "bmc": {"address": "127.0.0.1", "credential": "bmc"}})


def test_an_intent_is_on_disk_before_the_call_and_closed_by_the_hosts_move(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("h1", "r1"), ("h2", "r1")])
    step = ActingStep(store)
    results = asyncio.run(run_step(step, store, [_host("h1"), _host("h2")], RunLimits(4, 10)))
    assert all(r.ok for r in results)
    assert step.seen_before_call == {"h1": ["reset On"], "h2": ["reset On"]}
    assert open_intents(store) == []
    ids = [int(r[0]) for r in store.reader().execute("SELECT id FROM intents").fetchall()]
    assert {outcome for outcome, _ in closed(store, ids).values()} == {Outcome.recorded.value}
    assert all(seen == {"state": "bmc_reachable", "reason": None} for _, seen in closed(store, ids).values())


def test_a_move_the_store_refuses_leaves_the_intent_open(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("h1", "r1")])
    store.mark("h1", State.failed, reason="pcie_width_x4")  # an operator, meanwhile: failed while declared

    async def run() -> None:
        recorder = Recorder(store)
        rec = Recording(recorder, "test")
        await rec.intend("h1", "maas", "abc123", "deploy", "Deployed")
        with pytest.raises(IllegalTransition, match="skips steps"):
            await rec.move("h1", State.deployed)
        await recorder.close()

    asyncio.run(run())
    assert [i.action for i in open_intents(store)] == ["deploy"]  # the record did not happen: nor did its close


def test_runs_are_told_alive_from_dead_by_pid_and_start_time() -> None:
    assert run_alive(this_run())
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    assert not run_alive(f"{socket.gethostname()}:{done.stdout.strip()}:12345")  # exited (or a pid reused since)
    zombie = subprocess.Popen(["true"])  # exits at once and stays a zombie until waited for
    try:
        for _ in range(200):
            if start_time(zombie.pid) is None:
                break
            subprocess.run(["sleep", "0.01"], check=True)
        assert start_time(zombie.pid) is None
        assert not run_alive(f"{socket.gethostname()}:{zombie.pid}:1")
    finally:
        zombie.wait()
    me = this_run().rsplit(":", 1)[0]
    assert not run_alive(f"{me}:0")  # this pid with another start time: a reused pid, not this run
    assert run_alive("another-controller:1:1")  # cannot be checked from here: left to that machine
    assert not run_alive("garbage")


def test_what_a_peer_showed_is_stored_redacted(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("h1", "r1")])
    hold("s3cret-value-42")
    try:
        with store.transaction() as db:
            found = begin_in(db, Ask("h1", "bmc", "https://bmc", "reset On", "On", "power on"))
        with store.transaction() as db:
            close(db, [found], Outcome.failed, {"error": "BMC said s3cret-value-42", "password": "pw"})
        stored = store.reader().execute("SELECT observed FROM intents").fetchone()[0]
    finally:
        forget_all()
    assert "s3cret-value-42" not in stored and '"pw"' not in stored


def test_a_host_with_an_open_intent_is_neither_promoted_nor_in_the_golden_hostfile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site_path = write_site(tmp_path, 3, 8443, policy="golden_requires_burn_in: false")
    site = load_site(site_path)
    store = StateStore(tmp_path / "s.db")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    for name in ("h000", "h001"):
        store.mark(name, State.healthy, reason="test")
    store.mark("h002", State.golden, reason="test")
    with store.transaction() as db:
        pending = [begin_in(db, Ask(h, "bmc", "https://bmc", "reset ForceOff", "Off", "power off"))
                   for h in ("h001", "h002")]
    assert set(hosts_in_flight(store)) == {"h001", "h002"}

    moves = promote_golden(site, store)
    assert [m.host for m in moves] == ["h000"]
    assert store.get("h001").state is State.healthy
    assert {h.hostname for h in golden_hosts(load_index(site_path), store)} == {"h000"}  # h002 left out
    code = main(["golden", "--site", str(site_path), "--db", str(store.path), "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 0 and [h["hostname"] for h in shown["hosts"]] == ["h000"]
    assert list(shown["held_back"]) == ["h002"] and "reset ForceOff (Off) asked by `power off`" in \
        shown["held_back"]["h002"]
    assert main(["status", "--site", str(site_path), "--db", str(store.path), "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["in_flight"]) == ["h001", "h002"]  # golden or not
    assert main(["status", "--site", str(site_path), "--db", str(store.path)]) == 0
    assert "in flight h002: a change is in flight: bmc reset ForceOff" in " ".join(capsys.readouterr().out.split())

    with store.transaction() as db:
        close(db, pending, Outcome.confirmed, {"power_state": "Off"})
    assert [m.host for m in promote_golden(site, store)] == ["h001"]
    assert {h.hostname for h in golden_hosts(load_index(site_path), store)} == {"h000", "h001", "h002"}


def test_reconciled_lines_are_printed_before_the_failures_and_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    said = "a run of `power on` died after asking BMC https://b for reset On of h1 (to On); BMC says [/bold]\x1b]0;x\x07"
    results = [HostResult("h1", True, reconciled=(said,)), HostResult("h2", False, reason="power_fault", detail="no")]
    render_failures(results)
    out = capsys.readouterr().out
    assert "reconciled a run of `power on` died after asking BMC" in out and "[/bold]" in out
    assert "\x1b" not in out and out.index("reconciled") < out.index("power_fault")
    assert result_json(results[0])["reconciled"] == [said] and "reconciled" not in result_json(results[1])
