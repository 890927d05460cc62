"""`provision firmware|bios apply` against the simulated iDRACs: SimpleUpdate from the controller's image server,
tasks followed, bounded reboots, read-back; canary, failure threshold, resume, and the bad inputs."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from provision.bios.step import apply_bios
from provision.bmc.step import RunOptions
from provision.errors import BringupError
from provision.firmware.rollout import RolloutResult, apply_firmware
from provision.firmware.step import InventoryStep
from provision.redfish import ClientOptions
from provision.site import Site
from provision.state import State, StateStore
from provision.state.intents import open_intents
from sim.redfish.server import Simulator
from tests.firmware.lab import baseline_with_images, firmware_of, image_rollout, load, serving, write_site
from tests.redfish.simlab import PASSWORD_VAR, new_password

# The iDRAC answers 503 with Retry-After while it restarts: the lab need not wait the 4 s the client caps it to.
FAST = RunOptions(client=ClientOptions(backoff_s=0.05, backoff_max_s=0.1))
OFF = {"installed": {"h01": {"bios": "1.14.1"}, "h02": {"hca": "28.39.1002"}, "h03": {"bmc": "7.00.00.00"}},
       "bios": {"h04": {"ProcCStates": "Enabled", "SriovGlobalEnable": "Disabled"}}}


def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim: dict[str, Any], *, hosts: int = 5,
        racks: int = 1, baseline: dict[str, Any] | None = None, **rollout: Any) -> tuple[Site, StateStore]:
    monkeypatch.setenv(PASSWORD_VAR, new_password())
    site = load(write_site(tmp_path, hosts, racks=racks, sim=sim, rollout=image_rollout(**rollout),
                           baseline=baseline if baseline is not None else baseline_with_images(tmp_path)))
    store = StateStore(tmp_path / "state.db")
    store.sync_site([(h.hostname, h.rack) for h in site.hosts()])
    for h in site.hosts():
        store.mark(h.hostname, State.golden, reason="test: a golden fleet")
    return site, store


async def inventory_then(site: Site, store: StateStore, operation: str) -> RolloutResult:
    await InventoryStep(site, store).run(site.hosts())
    apply = apply_firmware if operation == "firmware" else apply_bios
    return await apply(site, store, site.hosts(), FAST)


def run(site: Site, store: StateStore, tmp_path: Path, body: Any) -> Any:
    async def scenario() -> Any:
        async with serving(site, tmp_path / "certs") as sim:
            return await body(sim)
    return asyncio.run(scenario())


def test_drifted_hosts_are_updated_rebooted_read_back_and_sent_back_to_health(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, store = lab(tmp_path, monkeypatch, OFF, canary=1, batch_size=2, max_rebooting_per_rack=1)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        assert [w for w in result.plan.waves] == [("h01",), ("h02", "h03")]
        assert result.stopped is None and all(r.ok for r in result.results)
        for host, fqdd, version in (("h01", "BIOS.Setup.1-1", "1.15.0"), ("h02", "InfiniBand.Slot.31-1", "28.43.1014"),
                                    ("h03", "iDRAC.Embedded.1-1", "7.10.30.00")):
            assert firmware_of(sim, host).components[fqdd].version == version
            assert store.get(host).state is State.configured  # health and burn-in again before golden
        assert sim.bmcs["h01"].resets == ["On"] and sim.bmcs["h03"].resets == []  # the BMC's own: no reboot
        assert result.peak_rebooting_per_rack == 1
        assert [len(firmware_of(sim, h).updates) for h in ("h00", "h01", "h02", "h03")] == [0, 1, 1, 1]
        assert firmware_of(sim, "h03").gone_until > 0  # the iDRAC went away after its own update, and came back
        assert {r.data["updates"][0]["via"] for r in result.results} == {"SimpleUpdate"}
        assert store.get("h04").reason == "bios_drift" and open_intents(store) == []
        bios = await apply_bios(site, store, site.hosts(), FAST)
        assert [r.host for r in bios.results if r.ok] == ["h04"] and bios.results[0].data["apply_time"] == "OnReset"
        assert firmware_of(sim, "h04").bios["ProcCStates"] == "Disabled"
        assert store.get("h04").state is State.configured

    run(site, store, tmp_path, body)


def test_a_canary_failure_stops_the_rollout_before_the_first_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, store = lab(tmp_path, monkeypatch, {**OFF, "faults": {"h01": ["update_fails"]}}, canary=1)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        assert result.stopped is not None and result.stopped.startswith("the canary failed (h01)")
        assert [(r.host, r.reason) for r in result.results] == [("h01", "firmware_update_failed")]
        assert firmware_of(sim, "h02").updates == [] and firmware_of(sim, "h03").updates == []

    run(site, store, tmp_path, body)


def test_a_hung_task_times_out_its_host_and_the_others_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, store = lab(tmp_path, monkeypatch, {**OFF, "faults": {"h02": ["task_hangs"]}}, canary=0, batch_size=8,
                      max_failures=5, task_timeout_s=0.6)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        outcome = {r.host: r.reason for r in result.results}
        assert outcome == {"h01": None, "h02": "firmware_task_timeout", "h03": None}
        assert store.get("h02").reason == "firmware_task_timeout"
        assert [i.action for i in open_intents(store)] == []  # closed failed, not left open

    run(site, store, tmp_path, body)


def test_a_rollout_killed_mid_batch_resumes_without_flashing_finished_hosts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, store = lab(tmp_path, monkeypatch, OFF, canary=0, batch_size=8)

    async def body(sim: Simulator) -> None:
        await InventoryStep(site, store).run(site.hosts())
        firmware_of(sim, "h02").task_s = 30.0  # h02's update is still running when the controller dies
        killed = asyncio.create_task(apply_firmware(site, store, site.hosts(), FAST))
        while store.get("h01").state is not State.configured or store.get("h03").state is not State.configured:
            await asyncio.sleep(0.05)
        killed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await killed
        with store.transaction() as db:  # as a killed process leaves it: its run is gone
            db.execute("UPDATE intents SET run = ? WHERE closed_at IS NULL", (f"{socket.gethostname()}:1:0",))
        again = await apply_firmware(site, store, site.hosts(), FAST)
        assert again.reconciled == ["h02"] and [r.host for r in again.results] == ["h02"]  # still off: once more
        assert [len(firmware_of(sim, h).updates) for h in ("h01", "h02", "h03")] == [1, 2, 1]
        assert store.get("h02").state is State.configured and open_intents(store) == []


def test_an_update_that_landed_after_the_controller_died_is_read_back_not_flashed_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, store = lab(tmp_path, monkeypatch, {"installed": {"h02": {"hca": "28.39.1002"}}}, canary=0)

    async def body(sim: Simulator) -> None:
        await InventoryStep(site, store).run(site.hosts())
        firmware_of(sim, "h02").task_s = 30.0
        killed = asyncio.create_task(apply_firmware(site, store, site.hosts(), FAST))
        while not firmware_of(sim, "h02").updates:
            await asyncio.sleep(0.05)
        killed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await killed
        with store.transaction() as db:
            db.execute("UPDATE intents SET run = ? WHERE closed_at IS NULL", (f"{socket.gethostname()}:1:0",))
        for comp in firmware_of(sim, "h02").components.values():  # the BMC finished it on its own
            if comp.kind == "hca":
                comp.version = "28.43.1014"
        again = await apply_firmware(site, store, site.hosts(), FAST)
        assert again.reconciled == ["h02"] and again.results == [] and again.plan.hosts == ()
        assert len(firmware_of(sim, "h02").updates) == 1 and store.get("h02").state is State.configured
        assert open_intents(store) == []

    run(site, store, tmp_path, body)

    run(site, store, tmp_path, body)


def test_bad_inputs_are_refused_with_a_clear_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    faults = {"h01": ["update_refused"], "h02": ["task_off_bmc"], "h04": ["setting_refused"]}
    site, store = lab(tmp_path, monkeypatch, {**OFF, "faults": faults}, canary=0, max_failures=10)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        outcome = {r.host: r.reason for r in result.results}
        assert outcome == {"h01": "firmware_update_refused", "h02": "firmware_task_off_bmc", "h03": None}
        posts = sim.bmcs["h01"].requests
        bios = await apply_bios(site, store, site.hosts(), FAST)
        assert [(r.host, r.reason) for r in bios.results] == [("h04", "bios_setting_refused")]
        assert sim.bmcs["h01"].requests == posts  # no retry storm on the refusing BMC
        (tmp_path / "images" / "bios-1.15.0.bin").write_bytes(b"BRINGUP-SIM-FIRMWARE kind=bios version=6.6.6\n")
        await InventoryStep(site, store).run(site.hosts())
        before = [len(firmware_of(sim, h).updates) for h in ("h01", "h02", "h03")]
        with pytest.raises(BringupError, match="firmware_image_mismatch"):
            await apply_firmware(site, store, site.hosts(), FAST)
        assert [len(firmware_of(sim, h).updates) for h in ("h01", "h02", "h03")] == before  # no BMC was told

    run(site, store, tmp_path, body)


@pytest.mark.parametrize(("per_rack", "site_wide"), [(1, 1), (2, 3)])
def test_reboots_never_exceed_the_site_and_rack_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       per_rack: int, site_wide: int) -> None:
    drifted = {f"h{i:02d}": {"ProcCStates": "Enabled"} for i in range(8)}
    site, store = lab(tmp_path, monkeypatch, {"bios": drifted}, hosts=8, racks=2, canary=0, batch_size=8,
                      max_rebooting_per_rack=per_rack, max_rebooting=site_wide)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "bios")
        assert sum(r.ok for r in result.results) == 8
        assert result.peak_rebooting_per_rack <= per_rack and result.peak_rebooting <= site_wide
        assert result.peak_rebooting == site_wide  # the limit is reached, not just respected by running one at a time
        assert all(firmware_of(sim, f"h{i:02d}").bios["ProcCStates"] == "Disabled" for i in range(8))

    run(site, store, tmp_path, body)


def test_the_simulators_update_faults_each_fail_their_host_with_its_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """version_unchanged (a staged update lost at the reboot), bmc_gone_long (the iDRAC away past the site's
    bmc_return_timeout_s after its own update), bios_not_applied (pending attributes dropped at the reboot)."""
    faults = {"h01": ["version_unchanged"], "h03": ["bmc_gone_long"], "h04": ["bios_not_applied"]}
    site, store = lab(tmp_path, monkeypatch, {**OFF, "faults": faults}, canary=0, max_failures=10,
                      bmc_return_timeout_s=0.5)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        outcome = {r.host: r.reason for r in result.results}
        assert outcome == {"h01": "firmware_version_unchanged", "h02": None, "h03": "bmc_did_not_return"}
        assert "BIOS.Setup.1-1: 1.14.1 (wanted 1.15.0)" in next(r.detail for r in result.results if r.host == "h01")
        bios = await apply_bios(site, store, site.hosts(), FAST)
        assert [(r.host, r.reason) for r in bios.results] == [("h04", "bios_not_applied")]
        assert open_intents(store) == []  # every one closed failed, none left for a later run to wonder about

    run(site, store, tmp_path, body)


def test_a_bmc_without_simple_update_gets_the_image_pushed_multipart(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's HGX BMC offers only MultipartHttpPushUri (the GB300 crawl): the image is read, checked against its pin
    and pushed. A site without an image server (no image_url) pushes to every BMC that takes a push (an iDRAC9
    offers both)."""
    faults = {"h01": ["no_simple_update"], "h03": ["no_simple_update"]}
    site, store = lab(tmp_path, monkeypatch, {**OFF, "faults": faults}, canary=0, max_failures=10)
    rollout = site.spec.firmware_rollout.model_copy(update={"image_url": None})
    site = site.model_copy(update={"spec": site.spec.model_copy(update={"firmware_rollout": rollout})})

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        outcome = {r.host: r.reason for r in result.results}
        assert outcome == {"h01": None, "h02": None, "h03": None}
        assert {r.data["updates"][0]["via"] for r in result.results} == {"MultipartHttpPushUri"}
        assert firmware_of(sim, "h01").components["BIOS.Setup.1-1"].version == "1.15.0"
        assert firmware_of(sim, "h03").components["iDRAC.Embedded.1-1"].version == "7.10.30.00"
        assert firmware_of(sim, "h01").updates == ["MultipartUpload"]

    run(site, store, tmp_path, body)
