"""The commands over the simulator as a process: `provision firmware inventory`, `firmware|bios plan`,
`bios apply`, and `provision status` showing the fleet's versions per component."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provision.cli import main
from tests.firmware.lab import write_site
from tests.firmware.test_apply_sim import OFF
from tests.redfish.simlab import PASSWORD_VAR, SimProcess, new_password


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_inventory_plan_apply_and_status_from_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    site = write_site(tmp_path, 5, sim=OFF, rollout={"canary": 1, "batch_size": 4})
    common = ["--site", str(site), "--db", str(tmp_path / "state.db")]
    with SimProcess(site, password, tmp_path / "run", power_delay_ms=50):
        code, out = cli(capsys, "firmware", "inventory", *common, "--retries", "0")
        assert code == 1
        failed = {h["host"]: h["reason"] for h in out["hosts"] if not h["ok"]}
        assert failed == {"h01": "firmware_drift", "h02": "firmware_drift", "h03": "firmware_drift",
                          "h04": "bios_drift"}
        code, plan = cli(capsys, "firmware", "plan", *common)
        assert code == 0 and plan["waves"] == [] and len(plan["blocked"]) == 3  # the lab's baseline has no images
        assert plan["blocked"][0]["blocked"].startswith("cannot update bios (no image pinned)")
        code, bios = cli(capsys, "bios", "plan", *common)
        assert bios["waves"] == [["h04"]] and bios["hosts"][0]["settings"] == {
            "ProcCStates": "Disabled", "SriovGlobalEnable": "Enabled"}
        code, applied = cli(capsys, "bios", "apply", *common, "--retries", "0")
        assert code == 0 and applied["counts"]["done"] == 1 and applied["stopped"] is None
        code, status = cli(capsys, "status", *common)
        assert status["firmware_versions"]["bios"] == {"1.14.1": 1, "1.15.0": 4}
        assert status["firmware_versions"]["bmc"] == {"7.00.00.00": 1, "7.10.30.00": 4}
        # h04 re-entered where it failed (declared: at bmc_reachable); h00 was never off its baseline
        assert [status["by_state"][s] for s in ("declared", "bmc_reachable", "failed")] == [1, 1, 3]
