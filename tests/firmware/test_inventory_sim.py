"""`provision firmware inventory` against the simulated iDRACs: the baseline judged, drift failed with the
component, the version seen and the one wanted, a fixed host back into the flow, the golden gate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from provision.firmware.gate import off_baseline
from provision.firmware.step import InventoryStep
from provision.firmware.table import read_rows, version_spread
from provision.state import State, StateStore
from tests.firmware.lab import firmware_of, load, serving, write_site
from tests.redfish.simlab import PASSWORD_VAR, new_password

SIM = {"installed": {"h01": {"bios": "1.14.1"}}, "bios": {"h02": {"ProcCStates": "Enabled"}}}


def test_inventory_judges_each_host_against_its_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_VAR, new_password())
    site = load(write_site(tmp_path, 4, sim=SIM))
    store = StateStore(tmp_path / "state.db")
    store.sync_site([(h.hostname, h.rack) for h in site.hosts()])
    for h in site.hosts():
        store.mark(h.hostname, State.configured, reason="test")

    async def scenario() -> None:
        async with serving(site, tmp_path / "certs") as sim:
            results = {r.host: r for r in await InventoryStep(site, store).run(site.hosts())}
            assert [results[h].ok for h in ("h00", "h01", "h02", "h03")] == [True, False, False, True]
            assert results["h01"].reason == "firmware_drift"
            assert results["h01"].detail == "off its firmware baseline: BIOS.Setup.1-1: 1.14.1 (wanted 1.15.0)"
            assert results["h02"].reason == "bios_drift"
            drift = store.get("h02").evidence["drift"]["bios"]
            assert drift == [{"component": "ProcCStates", "seen": "Enabled", "wanted": "Disabled"}]
            assert off_baseline(site, store) == {
                "h01": "BIOS.Setup.1-1: 1.14.1 (wanted 1.15.0)", "h02": "ProcCStates: Enabled (wanted Disabled)"}
            spread = version_spread(read_rows(store).values())
            assert spread["bios"] == {"1.14.1": 1, "1.15.0": 3} and spread["hca"] == {"28.43.1014": 4}
            # fixed by hand: the next inventory puts it back where it failed
            firmware_of(sim, "h02").bios["ProcCStates"] = "Disabled"
            again = {r.host: r for r in await InventoryStep(site, store).run(site.hosts())}
            assert again["h02"].ok and again["h02"].data["back_to"] == "configured"
            assert store.get("h02").state is State.configured
            assert again["h01"].reason == "firmware_drift"  # taken again: still off its baseline
    asyncio.run(scenario())


def test_a_class_without_baseline_and_the_policy_off_hold_nothing_back(tmp_path: Path) -> None:
    site = load(write_site(tmp_path, 1, baseline={}))
    store = StateStore(tmp_path / "state.db")
    store.sync_site([("h00", "r0")])
    assert off_baseline(site, store) == {}
    site2 = load(write_site(tmp_path / "b", 1))
    assert off_baseline(site2, store) == {"h00": "never inventoried: run `provision firmware inventory`"}
