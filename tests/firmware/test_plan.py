"""The rollout plan (pure): waves after a canary, host firmware before the BMC's own, what cannot be planned and
why, a baseline pin no host has; and the golden gate keeping a burned-in host off its baseline out of golden."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from provision.firmware.drift import Drift, Judgement
from provision.firmware.plan import plan_rollout, waves
from provision.firmware.table import FirmwareRow, write_rows
from provision.golden.step import GoldenStep
from provision.site.firmware import FirmwareRollout
from provision.state import State, StateStore
from tests.firmware.lab import baseline_with_images, load, write_site
from tests.redfish.simlab import PASSWORD_VAR


def drift(component: str, seen: str | None, wanted: str, kind: str, pin: str) -> Drift:
    return Drift("firmware", component, seen, wanted, kind, pin)


def test_waves_are_a_canary_then_batches_in_site_order() -> None:
    names = [f"h{i}" for i in range(7)]
    assert waves(names, FirmwareRollout(canary=1, batch_size=3)) == (("h0",), ("h1", "h2", "h3"), ("h4", "h5", "h6"))
    assert waves(names[:2], FirmwareRollout(canary=0, batch_size=8)) == (("h0", "h1"),)


def test_the_plan_orders_the_bmc_last_and_says_what_it_cannot_do(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_VAR, "x")
    base = baseline_with_images(tmp_path)
    base["components"].append({"kind": "psu", "min_version": "1.0"})  # no image, and no host reports a PSU
    site = load(write_site(tmp_path, 4, baseline=base, rollout={"canary": 1, "batch_size": 2}))
    judgements: dict[str, Judgement | None] = {
        "h00": Judgement((drift("iDRAC.Embedded.1-1", "7.0", ">= 7.10.30.00", "bmc", "bmc"),
                          drift("BIOS.Setup.1-1", "1.14.1", "1.15.0", "bios", "bios"),
                          drift("psu", None, ">= 1.0", "psu", "psu"))),
        "h01": Judgement((drift("psu", None, ">= 1.0", "psu", "psu"),)),
        "h02": None,
        "h03": Judgement((drift("BIOS.Setup.1-1", "1.14.1", "1.15.0", "bios", "bios"),
                          drift("psu", None, ">= 1.0", "psu", "psu"))),
    }
    states = {"h03": ("failed", "bmc_auth")}
    plan = plan_rollout(site, "firmware", judgements, states)
    assert [h.host for h in plan.hosts] == ["h00"] and [u.kind for u in plan.host("h00").updates] == ["bios", "bmc"]
    assert plan.canary and plan.waves == (("h00",),)  # one host to change: it is the canary, as the rollout runs it
    blocked = {h.host: h.blocked or "" for h in plan.blocked}
    assert blocked["h02"].startswith("never inventoried") and blocked["h03"] == "failed (bmc_auth): fix that first"
    assert "psu" in blocked["h01"] and plan.unmatched == ("psu",)


def test_a_burned_in_host_off_its_baseline_is_not_promoted_golden(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_VAR, "x")
    site = load(write_site(tmp_path, 2, rollout={}))
    store = StateStore(tmp_path / "state.db")
    store.sync_site([(h.hostname, h.rack) for h in site.hosts()])
    for h in site.hosts():
        store.mark(h.hostname, State.burned_in, reason="test")
    off = Judgement(bios=(Drift("bios", "ProcCStates", "Enabled", "Disabled"),))
    write_rows(store, [FirmwareRow("h00", 1.0, {"components": []}, off.as_json(), False, "test"),
                       FirmwareRow("h01", 1.0, {"components": []}, Judgement().as_json(), True, "test")])
    moves = asyncio.run(GoldenStep(site, store).promote(site.hosts()))
    assert [m.host for m in moves] == ["h01"] and store.get("h00").state is State.burned_in
