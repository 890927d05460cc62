"""`fabric ports apply --apply` and `reenable` in-band (a site without UFM: the real `ibportstate` over directed
routes), killed (SIGKILL) between intent and record, and the next acting run reconciling what they left.

The kill comes from the tool, as tests/slurm's scontrol that kills its caller: an `ibportstate` first on the
PATH runs the real one and, when the test left a marker for that action, sends SIGKILL to its parent (the
CLI): `before-disable` kills before the real tool runs, `after-disable` / `after-enable` once it changed the
port. In-band a host link changes at its switch end only (the HCA behind a disabled link is out of reach), so
the points are: after the `planned` row, after the switch end's disable, after the switch end's enable.

About 30 s on an idle machine: three killed CLI processes (forked from a forkserver that imported the CLI once,
tests/redfish/killing_sim.CliProcesses) and one reconciling run, each with live discovery.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from fabric.design import load_design
from fabric.ports.actuate import IbPortState
from fabric.ports.ledger import APPLY_FAILED, DISABLED, PLANNED, REENABLING, Ledger, LedgerEntry
from fabric.topology import End
from provision.site import load_site
from provision.site.store import open_store
from provision.state import State
from sim.ibfabric import IbFabric
from sim.ibfabric.diags_prefix import sim_diags
from sim.ibfabric.routing import route
from tests.fabric.ports.test_kill_points_ufm import NOW, A, B
from tests.redfish.killing_sim import CliProcesses
from tests.sites import copy_sim_site

pytestmark = pytest.mark.tools("ibsim", "ibportstate")
UFM = ', ufm: {url: "https://127.0.2.2:8443/", credential: ufm-admin, verify_tls: false}'
KILLING_IBPORTSTATE = """#!/bin/sh
for last in "$@"; do :; done
if [ -e "$KILL_MARKERS/before-$last" ]; then rm -f "$KILL_MARKERS/before-$last"; kill -9 $PPID; exit 9; fi
{real} "$@"
rc=$?
if [ -e "$KILL_MARKERS/after-$last" ]; then rm -f "$KILL_MARKERS/after-$last"; kill -9 $PPID; fi
exit $rc
"""


@dataclass(frozen=True)
class Lab:
    site: Path
    db: Path
    fabric: IbFabric
    state: Path
    tools: Path
    markers: Path
    events: dict[str, Path]
    cli: CliProcesses


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("inbandkill")
    site = copy_sim_site(tmp / "sim")
    text = site.read_text()
    assert UFM in text
    site.write_text(text.replace(UFM, ""))
    tools, markers = tmp / "killing-tools", tmp / "markers"
    tools.mkdir()
    markers.mkdir()
    (tools / "ibportstate").write_text(KILLING_IBPORTSTATE.format(real=shutil.which("ibportstate")))
    (tools / "ibportstate").chmod(0o755)
    events = {name: tmp / f"events-{name}.log" for name in ("A", "B")}
    events["A"].write_text(A.event())
    events["B"].write_text(B.event())
    db = tmp / "state" / "inband.db"
    db.parent.mkdir()
    loaded = load_site(site)
    with open_store(loaded, db) as store:
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        for hl in (A, B):
            store.mark(hl.host, State.golden, reason="earned golden before the port apply (test setup)")
    state = tmp / "ibfabric.json"
    cli = CliProcesses(cli="fabric.cli")
    try:
        with IbFabric(load_design(tmp / "sim" / "fabric" / "design.yml"), state_file=state) as fabric:
            route(fabric)  # the site's subnet manager has swept: ports Active, as on a running fabric
            yield Lab(site, db, fabric, state, tools, markers, events, cli)
    finally:
        cli.close()


def _killed(lab: Lab, marker: str, *args: str) -> None:
    (lab.markers / marker).touch()
    env = {**os.environ, "BRINGUP_IB_DIAGS": str(lab.state), "KILL_MARKERS": str(lab.markers),
           "PATH": f"{lab.tools}:{os.environ['PATH']}"}
    proc = lab.cli.start(["ports", *args, "--site", str(lab.site), "--db", str(lab.db)], env)
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
    assert proc.exitcode == -signal.SIGKILL, (proc.exitcode, args)
    assert not (lab.markers / marker).exists()


def _apply(lab: Lab, events: str) -> tuple[str, ...]:
    return ("apply", "--apply", "--events", str(lab.events[events]), "--now", NOW)


def _switch_phys(lab: Lab, end: End) -> str:
    import asyncio

    actuator = IbPortState(lab.fabric.discover, sim_diags(lab.fabric.socket))
    return asyncio.run(actuator.status(end)).phys


def _current(lab: Lab) -> tuple[dict[str, LedgerEntry], dict[str, State]]:
    with open_store(load_site(lab.site), lab.db) as store:
        return Ledger(store).current(), {hl.host: store.get(hl.host).state for hl in (A, B)}


def test_inband_apply_and_reenable_killed_between_intent_and_record_are_reconciled(
        lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A: killed after its `planned` row, before the switch end's disable ran
    _killed(lab, "before-disable", *_apply(lab, "A"))
    rows, hosts = _current(lab)
    assert rows[A.link].state == PLANNED and _switch_phys(lab, A.switch_end) == "LinkUp"
    assert hosts[A.host] is State.failed

    # B: killed once its switch end was disabled; the run first recorded A as not done
    _killed(lab, "after-disable", *_apply(lab, "B"))
    rows, hosts = _current(lab)
    assert rows[A.link].state == APPLY_FAILED and "found every end up: nothing was done" in rows[A.link].detail
    assert rows[B.link].state == PLANNED and _switch_phys(lab, B.switch_end) == "Disabled"

    # re-enable B: the run first records B disabled (found so), then is killed once the switch end is enabled
    _killed(lab, "after-enable", "reenable", B.link, "--repaired", "--window", "1s", "--train", "1s")
    rows, hosts = _current(lab)
    history = [r.state for r in _history(lab, B.link)]
    assert history == [PLANNED, DISABLED, REENABLING] and _switch_phys(lab, B.switch_end) != "Disabled"
    assert hosts[B.host] is State.failed

    # the next acting run puts B out of service again: the repair was never proven
    monkeypatch.setenv("BRINGUP_IB_DIAGS", str(lab.state))
    capsys.readouterr()
    code = fabric_main(["ports", *_apply(lab, "B"), "--site", str(lab.site), "--db", str(lab.db)])
    out = capsys.readouterr().out
    assert code == 0 and f"reenabling -> disabled     {B.link}: reconciled after an interrupted run" in out, out
    rows, hosts = _current(lab)
    assert rows[B.link].state == DISABLED and _switch_phys(lab, B.switch_end) == "Disabled"
    hca = next(e for e in rows[B.link].ends if not e.is_switch)
    assert (hca.done or "").startswith("left enabled: ibportstate cannot reach a host's HCA")
    assert hosts == {A.host: State.configured, B.host: State.failed}


def _history(lab: Lab, link: str) -> list[LedgerEntry]:
    with open_store(load_site(lab.site), lab.db) as store:
        return Ledger(store).history(link)
