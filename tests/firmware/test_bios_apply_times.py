"""BIOS apply times beyond OnReset: `@Redfish.SettingsApplyTime` {ApplyTime, MaintenanceWindowStartTime,
MaintenanceWindowDurationInSeconds} (DMTF Settings.v1_4_0, REFERENCE-wave3 B3), chosen by the site
(`firmware_rollout.bios_apply_time`, `maintenance_window`) and held to the Bios's SupportedApplyTimes: the
simulator refuses what it does not list as a BMC does (400, Base registry PropertyValueNotInList; the R650's list
has no Immediate, realdata akaliwod/iserver UriSystems.md), the client refuses it before any PATCH."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from provision.bios.step import apply_bios
from provision.firmware.step import InventoryStep
from provision.site import Host, Site, load_site
from provision.site.firmware import FirmwareRollout
from sim.redfish.firmware_bios import ApplyRule, apply_rule
from sim.redfish.firmware_flavours import R650_APPLY_TIMES
from sim.redfish.http import Response
from sim.redfish.server import Simulator
from tests.firmware.test_apply_sim import FAST, lab, run

OFF = {"ProcCStates": "Enabled"}


def _error(answer: ApplyRule | Response) -> tuple[int, str, str]:
    assert isinstance(answer, Response)
    info = json.loads(answer.body)["error"]["@Message.ExtendedInfo"][0]
    return answer.status, info["MessageId"], info["Message"]


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat()


def test_the_simulated_bmc_refuses_an_apply_time_its_bios_does_not_list_as_a_bmc_does() -> None:
    now = time.time()
    body = {"Attributes": OFF, "@Redfish.SettingsApplyTime": {"ApplyTime": "Immediate"}}
    assert _error(apply_rule(body, R650_APPLY_TIMES)) == (
        400, "Base.1.13.PropertyValueNotInList",
        "The value Immediate for the property ApplyTime is not in the list of acceptable values.")
    assert _error(apply_rule(body, ()))[1] == "Base.1.13.PropertyValueNotInList"  # lists none: OnReset only
    assert apply_rule({"Attributes": OFF}, ()) == ApplyRule("OnReset")
    window = {"ApplyTime": "InMaintenanceWindowOnReset"}
    assert _error(apply_rule({"@Redfish.SettingsApplyTime": window}, R650_APPLY_TIMES))[1] == \
        "Base.1.13.PropertyMissing"
    over = {**window, "MaintenanceWindowStartTime": _iso(now - 7200), "MaintenanceWindowDurationInSeconds": 3600}
    assert _error(apply_rule({"@Redfish.SettingsApplyTime": over}, R650_APPLY_TIMES, now))[0] == 400
    open_now = {**over, "MaintenanceWindowStartTime": _iso(now - 60)}
    rule = apply_rule({"@Redfish.SettingsApplyTime": open_now}, R650_APPLY_TIMES, now)
    assert isinstance(rule, ApplyRule) and rule.applies_at_boot(now) and not rule.applies_at_boot(now + 3600)


def test_a_window_apply_time_needs_the_sites_maintenance_window() -> None:
    with pytest.raises(ValidationError, match="needs a maintenance_window"):
        FirmwareRollout(bios_apply_time="AtMaintenanceWindowStart")
    with pytest.raises(ValidationError, match="UTC offset"):
        FirmwareRollout(bios_apply_time="AtMaintenanceWindowStart",
                        maintenance_window={"start": "2026-12-12T02:00:00", "duration_s": 3600})


def _with_rollout(site: Site, name: str, **rollout: Any) -> Site:
    """The same site (same BMCs, same simulator), its firmware_rollout changed."""
    spec = yaml.safe_load(site.path.read_text())
    spec["firmware_rollout"].update(rollout)
    path = site.directory / f"{name}.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_site(path)


def test_bios_changes_apply_at_the_time_the_site_asks_where_the_bmc_lists_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """h00 lists Immediate (the BMC resets the host itself); h01 is an R650 (no Immediate: refused before any PATCH);
    h02, h03 and h04 take the site's maintenance window: open now (InMaintenanceWindowOnReset: rebooted inside it;
    AtMaintenanceWindowStart: the BMC resets the host itself) or ahead (scheduled: the BMC holds it, the host stays
    off its baseline until then)."""
    sim_file = {"bios": {h: OFF for h in ("h00", "h01", "h02", "h03", "h04")},
                "apply_times": {"h00": ["Immediate", "OnReset"]}}
    site, store = lab(tmp_path, monkeypatch, sim_file, hosts=5, canary=0, max_failures=10)
    now = time.time()

    def only(at: Site, *names: str) -> list[Host]:
        return [h for h in at.hosts() if h.hostname in names]

    async def body(sim: Simulator) -> None:
        for name in ("h00", "h01", "h02", "h03", "h04"):
            sim.bmcs[name].power = "On"
        fw = {h: sim.bmcs[h].firmware for h in ("h00", "h01", "h02", "h03", "h04")}
        await InventoryStep(site, store).run(site.hosts())
        immediate = _with_rollout(site, "immediate", bios_apply_time="Immediate")
        first = await apply_bios(immediate, store, only(immediate, "h00", "h01"), FAST)
        results = {r.host: r for r in first.results}
        assert results["h00"].ok and results["h00"].data["reboot"] == {"reset_by": "the BMC"}
        assert sim.bmcs["h00"].resets == ["BmcRestart"]  # no reset of ours
        assert results["h01"].reason == "bios_setting_refused" and "lists only OnReset" in results["h01"].detail
        assert fw["h01"] is not None and fw["h01"].patches == 0 and sim.bmcs["h01"].resets == []

        window = {"start": _iso(now - 60), "duration_s": 3600}
        opened = _with_rollout(site, "open", bios_apply_time="InMaintenanceWindowOnReset", maintenance_window=window)
        done = await apply_bios(opened, store, only(opened, "h02"), FAST)
        assert done.results[0].ok and done.results[0].data["apply_time"] == "InMaintenanceWindowOnReset"
        assert fw["h02"] is not None and fw["h02"].bios["ProcCStates"] == "Disabled"
        assert sim.bmcs["h02"].resets == ["ForceOff", "On"]  # ours, inside the window

        started = _with_rollout(site, "started", bios_apply_time="AtMaintenanceWindowStart", maintenance_window=window)
        begun = await apply_bios(started, store, only(started, "h04"), FAST)
        assert begun.results[0].ok and begun.results[0].data["reboot"] == {"reset_by": "the BMC"}
        assert sim.bmcs["h04"].resets == ["BmcRestart"]  # the BMC's, at the window's start (already begun)

        ahead = {"start": _iso(now + 3600), "duration_s": 3600}
        later = _with_rollout(site, "later", bios_apply_time="AtMaintenanceWindowStart", maintenance_window=ahead)
        held = await apply_bios(later, store, only(later, "h03"), FAST)
        assert held.results[0].ok and held.results[0].data["scheduled_for"] == _iso(now + 3600)
        assert held.results[0].data["then"] == "the BMC resets the host when the window starts"
        assert fw["h03"] is not None and fw["h03"].pending == {"ProcCStates": "Disabled"}
        assert sim.bmcs["h03"].resets == [] and store.get("h03").reason == "bios_drift"
        assert fw["h03"].pending_rule.start == pytest.approx(now + 3600, abs=1)

    run(site, store, tmp_path, body)
