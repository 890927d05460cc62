"""`fabric ports apply --apply` and `reenable` killed (SIGKILL) at every point between intent and record,
through the UFM simulator, and the next acting run reconciling what the killed one left in flight.

The kill comes from the UFM stand-in, not from a hook in the product: the simulator's `kill` job fault
(sim/ufm/faults.py, sim/ufm/callers.py) finds the process whose socket posted the action and sends it
SIGKILL, either on the POST (`before`: the intent row written, nothing changed) or once the port changed and
before the job says Completed (`after`). Each killed run is a real `python -m fabric.cli` process; the
fabric is the lab's ibsim, which the simulated UFM changes with the real `ibportstate`.

Three host links (A gpu-r1-05, B gpu-r1-07, C gpu-r2-06), each condemned by one 110 event in its own
`--events` file so each run plans one link; an apply disables the HCA end first, a re-enable enables the
switch end first, then the HCA end (which the simulated UFM enables from the HCA itself: the path
that failed with "can't open UMAD port" before sim/ufm/fabricview.py named its CA and port). The issue's
case is C: UFM disabled both ends and the run died before the `disabled`
row, so the link is no longer discovered and a plain rerun never planned it again; its host stayed golden.

The module takes about 25 s on a 2-core machine at load 3 (was 45 s there; ten CLI runs, six
of them killed processes, each with live discovery, and UFM jobs after each of which the simulated UFM sweeps
the fabric with opensm): the kill points are the behaviour, and each needs its own process (forked from a
forkserver that imported the CLI once, tests/redfish/killing_sim.CliProcesses).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from fabric.ports.ledger import APPLY_FAILED, DISABLED, PLANNED, REENABLED, REENABLING, Ledger, LedgerEntry
from fabric.topology import End
from provision.site import load_site
from provision.site.store import open_store
from provision.state import State
from tests.fabric.ufmsim import UfmSite, ufm_site
from tests.redfish.killing_sim import CliProcesses

pytestmark = pytest.mark.tools("ibsim", "opensm")
PASSWORD = "Ufm-kill-sim"
NOW = "2026-12-01T12:00:00Z"


@dataclass(frozen=True)
class HostLink:
    host: str
    hca: End
    switch: str
    switch_end: End

    @property
    def link(self) -> str:
        return "-".join(sorted(f"0x{e.guid}[{e.port}]" for e in (self.hca, self.switch_end)))

    def event(self) -> str:
        e = self.switch_end
        return (f"2026-12-01 11:00:05.000 [1] [110] WARNING [Hardware] IBPort [default(34) / Switch: {self.switch} "
                f"/ NA / {e.port}] [dev_id: {e.guid}]: Symbol error counter rate threshold exceeded\n")


A = HostLink("gpu-r1-05", End("b8599f0300000210", 1), "leaf-A-r3-U38", End("0c42a10300000010", 5))
B = HostLink("gpu-r1-07", End("b8599f0300000350", 1), "leaf-A-r3-U30", End("0c42a10300000050", 7))
C = HostLink("gpu-r2-06", End("b8599f03000006e0", 1), "leaf-A-r3-U28", End("0c42a10300000060", 14))
FAULTS = """jobs:
  duration_s: 0.2
  kill:
    - {node: gpu-r1-05/mlx5_1, port: 1, action: disable, times: 1, when: before}  # A: intent, nothing sent
    - {node: gpu-r1-07/mlx5_5, port: 1, action: disable, times: 1, when: after}   # B: its HCA end disabled
    - {node: leaf-A-r3-U28, port: 14, action: disable, times: 1, when: after}     # C: both ends disabled
    - {node: leaf-A-r3-U28, port: 14, action: enable, times: 1, when: before}     # re-enable C: intent only
    - {node: leaf-A-r3-U30, port: 7, action: enable, times: 1, when: after}       # re-enable B: switch end up
    - {node: gpu-r1-07/mlx5_5, port: 1, action: enable, times: 1, when: after}    # re-enable B: both ends up
"""


@dataclass(frozen=True)
class Lab:
    ufm: UfmSite
    db: Path
    events: dict[str, Path]
    cli: CliProcesses

    @property
    def site(self) -> Path:
        return self.ufm.site


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("ufmkill")
    events = {}
    for name, hl in (("A", A), ("B", B), ("C", C)):
        events[name] = tmp / f"events-{name}.log"
        events[name].write_text(hl.event())
    db = tmp / "state" / "kill.db"
    db.parent.mkdir()
    cli = CliProcesses(cli="fabric.cli")
    try:
        with ufm_site(tmp, PASSWORD, poll_s=600, faults=FAULTS) as ufm:
            site = load_site(ufm.site)
            with open_store(site, db) as store:
                store.sync_site((h.hostname, h.rack) for h in site.hosts())
                for hl in (A, B, C):
                    store.mark(hl.host, State.golden, reason="earned golden before the port apply (test setup)")
            yield Lab(ufm, db, events, cli)
    finally:
        cli.close()


def _env(lab: Lab) -> dict[str, str]:
    return {**os.environ, "BRINGUP_SIM_UFM_PASSWORD": PASSWORD, "BRINGUP_IB_DIAGS": str(lab.ufm.state)}


def _killed(lab: Lab, *args: str) -> None:
    """Run the CLI in its own process (`python -m fabric.cli`'s main, forked from a server that imported it
    once), which the UFM stand-in kills (SIGKILL) at the fault's point."""
    proc = lab.cli.start(["ports", *args, "--site", str(lab.site), "--db", str(lab.db)], _env(lab))
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
    assert proc.exitcode == -signal.SIGKILL, (proc.exitcode, args)


def _apply(lab: Lab, events: str) -> tuple[str, ...]:
    return ("apply", "--apply", "--events", str(lab.events[events]), "--now", NOW, "--job-timeout", "20s")


def _run(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    for key, value in _env(lab).items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = fabric_main(["ports", *args, "--site", str(lab.site), "--db", str(lab.db)])
    return code, capsys.readouterr().out


def _current(lab: Lab) -> tuple[dict[str, LedgerEntry], dict[str, State]]:
    with open_store(load_site(lab.site), lab.db) as store:
        return Ledger(store).current(), {hl.host: store.get(hl.host).state for hl in (A, B, C)}


def _history(lab: Lab, link: str) -> list[LedgerEntry]:
    with open_store(load_site(lab.site), lab.db) as store:
        return Ledger(store).history(link)


def test_apply_killed_at_each_point_is_reconciled_by_the_next_run(
        lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A: killed after its `planned` row, before anything was sent; its host already left golden
    _killed(lab, *_apply(lab, "A"))
    rows, hosts = _current(lab)
    assert rows[A.link].state == PLANNED and lab.ufm.phys(A.hca, A.switch_end) == ["LinkUp", "LinkUp"]
    assert hosts[A.host] is State.failed  # a host behind an in-flight change is never golden
    code, out = _run(lab, monkeypatch, capsys, "apply", "--events", str(lab.events["A"]), "--now", NOW)
    assert code == 0 and f"planned -> planned      {A.link}: in flight (row " in out, out  # a dry run reads no port
    assert _current(lab)[0][A.link].state == PLANNED

    # B: killed once UFM disabled its HCA end; the run first found A untouched and recorded it not done
    _killed(lab, *_apply(lab, "B"))
    rows, hosts = _current(lab)
    assert rows[A.link].state == APPLY_FAILED and "reconciled after an interrupted run" in rows[A.link].detail
    assert all((e.done or "").startswith("not done") for e in rows[A.link].ends)
    assert rows[B.link].state == PLANNED and lab.ufm.phys(B.hca, B.switch_end) == ["Disabled", "Polling"]
    assert hosts[B.host] is State.failed

    # C: killed once UFM disabled both ends (the case); the run first finished B
    _killed(lab, *_apply(lab, "C"))
    rows, hosts = _current(lab)
    assert rows[B.link].state == DISABLED and lab.ufm.phys(B.hca, B.switch_end) == ["Disabled", "Disabled"]
    assert rows[C.link].state == PLANNED and lab.ufm.phys(C.hca, C.switch_end) == ["Disabled", "Disabled"]
    assert hosts[C.host] is State.failed

    # the next run, not killed: C recorded disabled with the evidence, its ticket printed, its host still out
    code, out = _run(lab, monkeypatch, capsys, *_apply(lab, "C"), "--tickets")
    assert code == 0, out
    assert f"planned -> disabled     {C.link}: reconciled after an interrupted run" in out
    assert f"--- ticket {C.link}" in out and "leaf-A-r3-U28" in out
    rows, hosts = _current(lab)
    assert rows[C.link].state == DISABLED and rows[C.link].evidence[-1]["kind"] == "reconciled"
    assert {e.done for e in rows[C.link].ends} == {"already disabled (nothing sent) (found disabled after an "
                                                   "interrupted run)"}
    assert hosts == {A.host: State.configured, B.host: State.failed, C.host: State.failed}
    # and a plain rerun converges: C is under repair, nothing in flight, nothing sent
    code, out = _run(lab, monkeypatch, capsys, *_apply(lab, "C"))
    assert code == 0 and "in flight" not in out and "0 link(s) to disable" in out, out


def test_reenable_killed_at_each_point_is_reconciled_by_the_next_run(
        lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows, _hosts = _current(lab)
    if rows.get(C.link) is None or rows[C.link].state != DISABLED:
        pytest.skip("needs the links the apply test disabled")
    # C: killed on its first enable, nothing changed
    _killed(lab, "reenable", C.link, "--repaired", "--window", "1s", "--train", "2s")
    rows, hosts = _current(lab)
    assert rows[C.link].state == REENABLING and lab.ufm.phys(C.hca, C.switch_end) == ["Disabled", "Disabled"]
    assert hosts[C.host] is State.failed
    # B: killed once its switch end was enabled (the repair not proven); the run first put C back
    _killed(lab, "reenable", B.link, "--repaired", "--window", "1s", "--train", "2s")
    rows, hosts = _current(lab)
    assert rows[C.link].state == DISABLED and "reconciled after an interrupted run" in rows[C.link].detail
    assert rows[B.link].state == REENABLING and lab.ufm.phys(B.hca, B.switch_end) == ["Disabled", "Polling"]
    assert hosts[B.host] is State.failed
    # B again: the run first disables B's switch end again (the repair was never proven), then is killed once
    # both ends are enabled (its HCA end from the HCA), before the checks were recorded
    _killed(lab, "reenable", B.link, "--repaired", "--window", "1s", "--train", "5s")
    rows, hosts = _current(lab)
    reconciled = _history(lab, B.link)[-2]
    assert reconciled.state == DISABLED and "reconciled after an interrupted run" in reconciled.detail
    assert {e.name: e.done for e in reconciled.ends}["leaf-A-r3-U30"] == "disabled"
    assert rows[B.link].state == REENABLING and lab.ufm.phys(B.hca, B.switch_end) == ["LinkUp", "LinkUp"]
    assert hosts[B.host] is State.failed
    # and the re-enable run after it: B is first put out of service again, then re-enabled and proven
    code, out = _run(lab, monkeypatch, capsys, "reenable", B.link, "--repaired", "--window", "1s", "--train", "5s")
    assert code == 0, out
    assert f"reenabling -> disabled     {B.link}" in out and f"{B.link}: re-enabled (ledger row " in out
    rows, hosts = _current(lab)
    history = [r.state for r in _history(lab, B.link)]
    assert history[-4:] == [REENABLING, DISABLED, REENABLING, REENABLED]
    assert lab.ufm.phys(B.hca, B.switch_end) == ["LinkUp", "LinkUp"] and hosts[B.host] is State.configured
