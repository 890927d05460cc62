"""`provision firmware apply` and `provision bios apply` killed (SIGKILL, no handler runs) at every point between
the intent written before a BMC change and its record: the update (SimpleUpdate, or the multipart push) or the
Bios/Settings PATCH arriving (nothing done), the BMC having accepted it (its answer never arrives), the reset of
the reboot that activates it, and the read-back that shows it done. Each kill leaves an open intent and the host
out of the golden hostfile, with nothing recorded; the next `apply` (or `firmware inventory`) reads the BMC for
it, closes the intent `reconciled` with what the BMC showed, says so, never changes again a host whose change
landed, and finishes the others. The kills come from a wrapper in front of one simulated BMC
(tests/redfish/killing_sim.py), never from product code.

BMC behaviour: the simulated iDRAC's (sim/redfish/firmware.py, REFERENCE-wave3 B1-B4): host firmware is staged
by its task and installed at the next boot, the iDRAC's own firmware installs at once and the iDRAC restarts,
Bios/Settings stays pending until the next boot, each a job in the iDRAC's job queue (sim/redfish/firmware_jobs.py)
Scheduled until that boot. A SimpleUpdate's image is fetched from the controller's image server, which dies with the
controller: the task of a killed run ends Exception. An update or BIOS change the BMC holds Scheduled is activated
by a reboot, never sent again (the job queue read with the inventory, provision/firmware/jobs.py).

BIOS runs go at once (one process per host, each killed by its own BMC); firmware runs go one after another, as
each binds the site's one image server address.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from provision.cli import main
from provision.firmware.step import InventoryStep
from provision.firmware.table import read_rows
from provision.hostfiles import golden_hosts, held_back
from provision.site import load_site
from provision.site.index import load_index
from provision.state import State, StateStore
from provision.state.intents import RECONCILED, open_intents
from tests.firmware.lab import baseline_with_images, image_rollout, write_site
from tests.redfish.killing_sim import CliProcesses, InProcessSim, KillLab, KillPoint
from tests.redfish.simlab import PASSWORD_VAR, new_password

OLD_HCA = "28.39.1002"
HCA = "InfiniBand.Slot.31-1"
SIMPLE_UPDATE = "UpdateService.SimpleUpdate"
PUSH = "/MultipartUpload"
LANDED = "the BMC shows the host on its baseline: not changed again"
NOT_LANDED = "the BMC shows the host still off its baseline: the next apply changes it"
STAGED = "the next apply reboots the host without sending it again"  # after "the BMC holds it ... (job JID_.. Scheduled)"
STAGED_FIRMWARE = ("h04", "h05", "h14")  # killed after the BMC staged the update for the next reboot
PENDING_BIOS = ("h09", "h10", "h11")  # killed after the PATCH: a Scheduled BIOSConfiguration job waits for a reboot

# host -> (kill point, whether the change landed on the BMC before the next run)
FIRMWARE = {
    "h00": (KillPoint("SimpleUpdate arriving", "POST", acted=False, path=SIMPLE_UPDATE), False),
    # the BMC's task fetches the image from the dead controller's image server: it ends Exception
    "h01": (KillPoint("SimpleUpdate accepted, answer lost", "POST", acted=True, path=SIMPLE_UPDATE), False),
    "h02": (KillPoint("multipart push arriving", "POST", acted=False, path=PUSH), False),
    "h03": (KillPoint("push of the iDRAC's own firmware accepted, answer lost", "POST", acted=True, path=PUSH), True),
    # staged by the BMC, not activated (no reboot): still off its baseline, but its Dell job queue holds a
    # Scheduled FirmwareUpdate job for the HCA: rebooted, not pushed again
    "h14": (KillPoint("push of the HCA's firmware accepted, answer lost", "POST", acted=True, path=PUSH), False),
    "h04": (KillPoint("ForceOff of the activating reboot arriving", "POST", acted=False, reset="ForceOff"), False),
    "h05": (KillPoint("On of the activating reboot arriving", "POST", acted=False, reset="On"), False),
    "h06": (KillPoint("On done, answer lost", "POST", acted=True, reset="On"), True),
    "h07": (KillPoint("read-back of the inventory", "GET", acted=True, reset="On", power="On",
                      path="/FirmwareInventory"), True),
}
BIOS = {
    "h08": (KillPoint("Bios/Settings PATCH arriving", "PATCH", acted=False, path="/Bios/Settings"), False),
    "h09": (KillPoint("Bios/Settings PATCH pending, answer lost", "PATCH", acted=True, path="/Bios/Settings"), False),
    "h10": (KillPoint("ForceOff arriving", "POST", acted=False, reset="ForceOff"), False),
    "h11": (KillPoint("On arriving", "POST", acted=False, reset="On"), False),
    "h12": (KillPoint("On done, answer lost", "POST", acted=True, reset="On"), True),
    "h13": (KillPoint("read-back of the Bios", "GET", acted=True, reset="On", power="On", path="/Bios"), True),
}
BY_INVENTORY = "h12"  # reconciled by `firmware inventory` rather than by the next `bios apply`
SIM = {"installed": {**{h: {"hca": OLD_HCA} for h in FIRMWARE}, "h03": {"bmc": "7.00.00.00"}},
       "faults": {h: ["no_simple_update"] for h in ("h02", "h03", "h14")},
       "bios": {h: {"ProcCStates": "Enabled"} for h in BIOS}}


class Lab(KillLab):
    """The kill-point lab, with what these tests read of a simulated BMC."""

    def quiet(self, host: str, timeout_s: float = 10.0) -> None:
        """Until the BMC has nothing under way: power settled, tasks ended, the iDRAC back from its restart."""
        firmware = self.sim.bmc(host).firmware
        assert firmware is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (
                any(t.state in ("New", "Running") for t in list(firmware.tasks.values()))
                or time.monotonic() < firmware.gone_until):
            time.sleep(0.02)
        self.sim.settled(host)

    def seen(self, host: str) -> tuple[int, int, str]:
        """(updates the BMC was given, resets it carried out, the HCA's version)."""
        bmc = self.sim.bmc(host)
        assert bmc.firmware is not None
        return len(bmc.firmware.updates), len(bmc.resets), bmc.firmware.components[HCA].version


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("firmware-kills")
    password = new_password()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PASSWORD_VAR, password)
        site = write_site(tmp, len(FIRMWARE) + len(BIOS), sim=SIM, baseline=baseline_with_images(tmp),
                          rollout=image_rollout(canary=0, max_failures=20))
        (tmp / "state").mkdir()
        sim = InProcessSim(site, tmp / "certs", power_delay_s=0.05)
        try:
            for bmc in sim.simulator.bmcs.values():
                assert bmc.firmware is not None
                bmc.firmware.task_s, bmc.firmware.bmc_reboot_s = 0.1, 0.2
            lab = Lab(site, tmp / "state" / "t.db", sim, {**os.environ, PASSWORD_VAR: password},
                      CliProcesses(preload=["provision.firmware.rollout", "provision.bios.step"]))
            loaded = load_site(site)
            with lab.store() as store:
                store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
                for h in loaded.hosts():
                    store.mark(h.hostname, State.golden, reason="test: a golden fleet")
                    sim.set_power(h.hostname, "On")
                asyncio.run(InventoryStep(loaded, store).run(loaded.hosts()))
            yield lab
            lab.cli.close()
        finally:
            sim.stop()


def _cli(capsys: pytest.CaptureFixture[str], lab: Lab, *argv: str, as_json: bool = True) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*argv, "--site", str(lab.site), "--db", str(lab.db), *(["--json"] if as_json else [])])
    out = capsys.readouterr().out
    return code, json.loads(out) if as_json else out


def _killed_and_held_back(lab: Lab, store: StateStore, hosts: list[str], action: str, drift: str) -> None:
    """What every kill leaves: one open intent of a dead run, nothing recorded, the host out of golden."""
    rows = read_rows(store, hosts)
    golden = {h.hostname for h in golden_hosts(load_index(lab.site), store)}
    for host in hosts:
        assert [i.action for i in open_intents(store, hosts=[host], dead_only=True)] == [action], host
        assert (store.get(host).state, store.get(host).reason) == (State.failed, drift), host
        assert not rows[host].on_baseline, host  # the killed run recorded no read-back
        assert host not in golden, host
    assert set(held_back(store)).isdisjoint(hosts)  # failed already: not even golden in the store


def _said(store: StateStore, host: str, action: str) -> str:
    """What the run that reconciled the host found, as its history note says it: the change the dead run had asked
    for, and what the BMC shows."""
    note = next(e for e in reversed(store.history(host)) if e.reason == RECONCILED)
    command = note.evidence["intents"][0]["asked_by"]["command"]
    assert command == {"firmware_update": "firmware-apply", "bios_settings": "bios-apply"}[action]
    said = str(note.evidence["said"][0])
    assert said.startswith(f"a run of `{command}` died after asking BMC https://") and \
        f" for {action} of {host} (to " in said, said
    return said.rsplit("; ", 1)[1]


def test_firmware_apply_killed_at_every_point_is_reconciled_from_the_bmc_and_never_flashed_twice(
        lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = sorted(FIRMWARE)
    for host, (point, _) in FIRMWARE.items():  # one at a time: each run binds the site's image server
        lab.killed_runs(["firmware", "apply"], {host: point})
        lab.quiet(host)
    with lab.store() as store:
        _killed_and_held_back(lab, store, hosts, "firmware_update", "firmware_drift")
        before = {h: lab.seen(h) for h in hosts}
        for host, (point, landed) in FIRMWARE.items():
            wanted = "7.10.30.00" if host == "h03" else "28.43.1014"
            fqdd = "iDRAC.Embedded.1-1" if host == "h03" else HCA
            firmware = lab.sim.bmc(host).firmware
            assert firmware is not None
            assert (firmware.components[fqdd].version == wanted) is landed, point.name
            assert bool(firmware.staged) is (host in ("h04", "h05", "h14")), point.name  # waiting for a boot

        code, out = _cli(capsys, lab, "firmware", "apply", "--hosts", ",".join(hosts))
        assert code == 0, out
        assert out["reconciled"] == hosts
        results = {r["host"]: r for r in out["hosts"]}
        for host, (point, landed) in FIRMWARE.items():
            updates, resets, hca = lab.seen(host)
            said = _said(store, host, "firmware_update")
            staged = host in STAGED_FIRMWARE
            assert said.endswith(STAGED) if staged else said == (LANDED if landed else NOT_LANDED), point.name
            assert next(x for x in out["reconciled_lines"] if f" of {host} (" in x).endswith(said), point.name
            if landed:  # never flashed nor rebooted again
                assert host not in results and (updates, resets) == before[host][:2], point.name
            elif staged:  # the staged update activated by this run's reboot, not sent again
                assert results[host]["ok"] and updates == before[host][0] and hca == "28.43.1014", point.name
                assert resets > before[host][1], point.name
                assert [u["via"] for u in results[host]["data"]["updates"]] == ["staged"], point.name
            else:  # updated once more, by this run, and rebooted
                assert results[host]["ok"] and updates == before[host][0] + 1 and hca == "28.43.1014", point.name
            assert store.get(host).state is State.configured, point.name  # health and burn-in again
        assert open_intents(store, hosts=hosts) == []
        assert all(r.on_baseline for r in read_rows(store, hosts).values())


def test_bios_apply_killed_at_every_point_is_reconciled_by_the_next_inventory_or_apply(
        lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = sorted(BIOS)
    lab.killed_runs(["bios", "apply"], {h: point for h, (point, _) in BIOS.items()})
    for host in hosts:
        lab.quiet(host)
    with lab.store() as store:
        _killed_and_held_back(lab, store, hosts, "bios_settings", "bios_drift")
        before = {h: lab.seen(h) for h in hosts}
        for host, (point, landed) in BIOS.items():
            firmware = lab.sim.bmc(host).firmware
            assert firmware is not None
            assert (firmware.bios["ProcCStates"] == "Disabled") is landed, point.name

        code, out = _cli(capsys, lab, "firmware", "inventory", "--hosts", BY_INVENTORY)
        assert code == 0 and out["reconciled"] == [BY_INVENTORY]
        assert out["hosts"][0]["reconciled"][0].endswith(LANDED)
        assert _said(store, BY_INVENTORY, "bios_settings") == LANDED
        assert store.get(BY_INVENTORY).state is State.configured

        code, text = _cli(capsys, lab, "bios", "apply", "--hosts", ",".join(hosts), as_json=False)
        assert code == 0, text
        shown = " ".join(text.split())
        for host, (point, landed) in BIOS.items():
            firmware = lab.sim.bmc(host).firmware
            assert firmware is not None
            said = _said(store, host, "bios_settings")
            if host in PENDING_BIOS:
                assert said.endswith(STAGED), point.name
            else:
                assert said == (LANDED if landed else NOT_LANDED), point.name
            assert (f"for bios_settings of {host} (to ProcCStates=Disabled); {said}" in shown) is \
                (host != BY_INVENTORY), point.name  # the drifted attribute only
            resets = len(lab.sim.bmc(host).resets)
            assert firmware.patches == 1, point.name  # a PATCH the BMC holds pending is never sent again
            if landed:  # not PATCHed nor rebooted again
                assert resets == before[host][1], point.name
            else:
                assert resets > before[host][1] and not firmware.pending, point.name
            assert firmware.bios["ProcCStates"] == "Disabled", point.name
            assert store.get(host).state is State.configured, point.name
        assert open_intents(store, hosts=hosts) == []
