"""`provision power cycle` and `provision pxe-boot` killed (SIGKILL, no handler runs) at every point between
the intent written before a BMC change and its record: the BMC request arriving (nothing done), the BMC
having acted (its answer never arrives), and the read-back that shows it done. Each kill leaves an open
intent and the host out of golden; the next run reads the BMC for it, records what the BMC really shows in
the host's history, says so in its output, and then does its own work. The kills come from a wrapper in
front of one simulated BMC (`killing_sim.py`), never from product code.

Each matrix runs its CLI processes at once (one host each): a kill ends the whole process, so one process
can die only once. Behaviour of the BMC: the simulator's (DSP0266 resets, a Once override consumed by the
boot it causes, PowerState PoweringOn/Off while a change is under way).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from provision.bmc import HarvestStep
from provision.cli import main
from provision.hostfiles import golden_hosts
from provision.site import load_site
from provision.site.index import load_index
from provision.state import State, StateStore
from provision.state.intents import RECONCILED, Ask, Outcome, begin_in, close, closed, open_intents
from sim.redfish.faults import Fault
from tests.redfish.killing_sim import CliProcesses, InProcessSim, KillLab, KillPoint
from tests.redfish.simlab import PASSWORD_VAR, free_port, new_password, write_site

HOSTS = 15


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KillLab]:
    tmp = tmp_path_factory.mktemp("intent-kills")
    password = new_password()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PASSWORD_VAR, password)
        site = write_site(tmp, HOSTS, free_port())
        (tmp / "state").mkdir()
        sim = InProcessSim(site, tmp / "certs", power_delay_s=0.1)
        try:
            lab = KillLab(site, tmp / "state" / "t.db", sim, {**os.environ, PASSWORD_VAR: password}, CliProcesses(),
                          ("--poll", "0.05"))
            with lab.store() as store:
                loaded = load_site(site)
                results = asyncio.run(HarvestStep(loaded, store).run(loaded.hosts()))
                assert all(r.ok for r in results)
            yield lab
            lab.cli.close()
        finally:
            sim.stop()


def _cli(capsys: pytest.CaptureFixture[str], lab: KillLab, *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*argv, "--site", str(lab.site), "--db", str(lab.db), "--poll", "0.05", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _golden(lab: KillLab, store: StateStore) -> set[str]:
    return {h.hostname for h in golden_hosts(load_index(lab.site), store)}


# (kill point, the intent left open last, what the next run reads from the BMC for it)
POWER_CYCLE = {
    "h000": (KillPoint("ForceOff arriving", "POST", acted=False, reset="ForceOff"), "reset ForceOff",
             "BMC says On (not as asked), recorded"),
    "h001": (KillPoint("ForceOff done, answer lost", "POST", acted=True, reset="ForceOff"), "reset ForceOff",
             "BMC says Off (as asked), recorded"),
    "h002": (KillPoint("On arriving", "POST", acted=False, reset="On"), "reset On",
             "BMC says Off (not as asked), recorded"),
    "h003": (KillPoint("On done, answer lost", "POST", acted=True, reset="On"), "reset On",
             "BMC says On (as asked), recorded"),
    "h004": (KillPoint("read-back showing On", "GET", acted=True, reset="On", power="On"), "reset On",
             "BMC says On (as asked), recorded"),
}


def test_power_cycle_killed_at_every_point_is_recorded_from_the_bmc_by_the_next_run(
        lab: KillLab, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = sorted(POWER_CYCLE)
    with lab.store() as store:
        for host in hosts:
            store.mark(host, State.golden, reason="test: a golden host power-cycled")
            lab.sim.set_power(host, "On")
        assert _golden(lab, store) >= set(hosts)
        lab.killed_runs(["power", "cycle"], {h: point for h, (point, _, _) in POWER_CYCLE.items()})
        left = open_intents(store, hosts=hosts, dead_only=True)
        assert {i.host for i in left} == set(hosts)
        for host, (point, action, _) in POWER_CYCLE.items():
            assert [i.action for i in left if i.host == host] == [action], point.name
        assert _golden(lab, store).isdisjoint(hosts)  # a host behind an unrecorded change is not golden
        for host in hosts:
            lab.sim.settled(host)

        code, out = _cli(capsys, lab, "power", "cycle", "--hosts", ",".join(hosts))
        assert code == 0
        results = {r["host"]: r for r in out["hosts"]}
        for host, (point, action, said) in POWER_CYCLE.items():
            line = results[host]["reconciled"][-1]
            assert "died after asking BMC https://" in line and f"for {action} of {host}" in line, point.name
            assert line.endswith(said), f"{point.name}: {line}"
            note = store.history(host)[-1]
            assert note.reason == RECONCILED and note.command == "power cycle"
            assert note.evidence["observed"]["power_state"] == said.split()[2]
            assert note.evidence["intents"][-1]["asked_by"]["command"] == "power cycle"
            assert results[host]["ok"] and results[host]["data"]["power_state"] == "On"
        assert open_intents(store, hosts=hosts) == []
        assert _golden(lab, store) >= set(hosts)  # recorded: golden again, as the store still says
        code, out = _cli(capsys, lab, "power", "on", "--hosts", ",".join(hosts))
        assert code == 0 and all("reconciled" not in r for r in out["hosts"])  # nothing left to reconcile


ARMED = "h013"
# Hosts off before pxe-boot: PATCH the override, On. Hosts on (the site's off-on policy): PATCH, ForceOff, On.
PXE_BOOT = {
    "h005": ("Off", KillPoint("override PATCH arriving", "PATCH", acted=False),
             ["boot override: BMC says boot override None/Disabled, PowerState Off"]),
    "h006": ("Off", KillPoint("override set, answer lost", "PATCH", acted=True),
             ["boot override: BMC says boot override Pxe/Once, PowerState Off"]),
    "h007": ("Off", KillPoint("On arriving", "POST", acted=False, reset="On"),
             ["boot override: BMC says boot override Pxe/Once, PowerState Off",
              "reset On: BMC says Off (not as asked)"]),
    "h008": ("Off", KillPoint("On done, answer lost", "POST", acted=True, reset="On"),
             ["boot override: BMC says boot override None/Disabled, PowerState On",  # the boot used it
              "reset On: BMC says On (as asked)"]),
    "h009": ("Off", KillPoint("read-back showing On", "GET", acted=True, reset="On", power="On"),
             ["boot override: BMC says boot override None/Disabled, PowerState On",
              "reset On: BMC says On (as asked)"]),
    "h010": ("On", KillPoint("ForceOff arriving", "POST", acted=False, reset="ForceOff"),
             ["boot override: BMC says boot override Pxe/Once, PowerState On",
              "reset ForceOff: BMC says On (not as asked)"]),
    "h011": ("On", KillPoint("ForceOff done, answer lost", "POST", acted=True, reset="ForceOff"),
             ["boot override: BMC says boot override Pxe/Once, PowerState Off",
              "reset ForceOff: BMC says Off (as asked)"]),
}


def test_pxe_boot_killed_at_every_point_is_recorded_from_the_bmc_and_then_finished(
        lab: KillLab, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = sorted(PXE_BOOT)
    with lab.store() as store:
        for host, (power, _, _) in PXE_BOOT.items():
            lab.sim.set_power(host, power)
        lab.killed_runs(["pxe-boot"], {h: point for h, (_, point, _) in PXE_BOOT.items()})
        # A host pxe-boot passes over (armed already) with a power cycle a dead run left: read back all the same.
        store.transition(ARMED, State.pxe_armed, command="test")
        lab.sim.set_power(ARMED, "On")
        lab.killed_runs(["power", "cycle"], {ARMED: KillPoint("ForceOff arriving", "POST", acted=False,
                                                              reset="ForceOff")})
        for host, (_, point, said) in PXE_BOOT.items():
            assert store.get(host).state is State.macs_harvested, point.name  # nothing recorded
            assert len(open_intents(store, hosts=[host], dead_only=True)) == len(said), point.name
            lab.sim.settled(host)
        boots_before = {h: list(lab.sim.bmc(h).boots) for h in hosts}

        code, out = _cli(capsys, lab, "pxe-boot", "--hosts", ",".join([*hosts, ARMED]))
        assert code == 0
        results = {r["host"]: r for r in out["hosts"]}
        assert results[ARMED]["skipped"] and results[ARMED]["reconciled"][0].endswith(
            "reset ForceOff of h013 (to Off); BMC says On (not as asked), recorded")
        for host, (_, point, said) in PXE_BOOT.items():
            lines = results[host]["reconciled"]
            assert [f"{line.split(' for ')[1].split(' of ')[0]}: {line.split('; ')[1]}" for line in lines] == \
                [s + ", recorded" for s in said], point.name
            history = store.history(host)
            assert [e.reason or e.to_state.value for e in history[-2:]] == [RECONCILED, "pxe_armed"], point.name
            assert history[-2].command == "pxe-boot"
            assert lab.sim.bmc(host).boots[len(boots_before[host]):] == ["Pxe"]  # this run's own boot
        assert open_intents(store, hosts=[*hosts, ARMED]) == []


def test_a_reset_the_bmc_never_carries_out_closes_its_intent_failed_and_other_steps_intents_are_left_alone(
        lab: KillLab, capsys: pytest.CaptureFixture[str]) -> None:
    host = "h012"
    lab.sim.call(lab.sim.simulator.apply_faults({host: frozenset({Fault.power_fault})}))
    try:
        lab.sim.set_power(host, "Off")
        code, out = _cli(capsys, lab, "power", "on", "--hosts", host, "--power-timeout", "1")
    finally:
        lab.sim.call(lab.sim.simulator.apply_faults({}))
    assert code == 2 and out["hosts"][0]["reason"] == "power_fault"
    with lab.store() as store:
        ids = [int(r[0]) for r in store.reader().execute("SELECT id FROM intents WHERE host = ?", (host,))]
        assert [(outcome, seen["power_state"]) for outcome, seen in closed(store, ids).values()] == \
            [(Outcome.failed.value, "Off")]
        with store.transaction() as db:  # another step's BMC intent, left by a dead run: not power's to close
            firmware = begin_in(db, Ask(host, "bmc", "https://bmc", "firmware_update", "2.19.1", "firmware apply"))
            db.execute("UPDATE intents SET run = ? WHERE id = ?", (f"{socket.gethostname()}:1:1", firmware))
        code, out = _cli(capsys, lab, "power", "on", "--hosts", host)
        assert code == 0 and "reconciled" not in out["hosts"][0]  # the run recorded its own outcome
        assert out["hosts"][0]["data"]["power_state"] == "On"
        assert [i.id for i in open_intents(store, hosts=[host], dead_only=True)] == [firmware]
        with store.transaction() as db:
            close(db, [firmware], Outcome.failed, None)


def test_what_a_hostile_bmc_reports_for_a_dead_runs_change_is_shown_short_and_escaped(
        lab: KillLab, capsys: pytest.CaptureFixture[str]) -> None:
    host = "h014"
    with lab.store() as store:
        with store.transaction() as db:  # what a run killed right after asking leaves
            found = begin_in(db, Ask(host, "bmc", "https://bmc", "reset On", "On", "power on"))
            db.execute("UPDATE intents SET run = ? WHERE id = ?", (f"{socket.gethostname()}:1:1", found))
        lab.sim.set_power(host, "Off\x1b]0;owned\x07[/bold]" + "x" * 5000)
        capsys.readouterr()
        code = main(["power", "on", "--site", str(lab.site), "--db", str(lab.db), "--hosts", host, "--poll", "0.05"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "\x1b" not in out and "\x07" not in out and "x" * 100 not in out
        assert "reconciled a run of `power on` died after asking BMC https://bmc for reset On of h014" in out
        note = store.history(host)[-1]
        assert note.reason == RECONCILED and len(note.evidence["observed"]["power_state"]) <= 64
