"""The commands and OpenStack's sushy over the simulator as a process (sushy is synchronous: the simulator runs
beside the test, one process for the module, ~4 s to start on this machine).

- `provision firmware inventory`, `firmware|bios plan`, `bios apply`, and `provision status` showing the fleet's
  versions per component;
- sushy (Ironic's Redfish client) drives the UpdateService and Bios as it drives a BMC: SimpleUpdate returns a
  TaskMonitor that is processing (202) until the task ends; the BIOS's SupportedApplyTimes, set_attributes with
  ApplyTime OnReset, pending_attributes until the reboot, then the new value (sushy 5.x:
  sushy/resources/updateservice/updateservice.py, sushy/taskmonitor.py, sushy/resources/system/bios.py).
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provision.cli import main
from provision.site import load_site
from tests.firmware.lab import image, write_site
from tests.firmware.test_apply_sim import OFF
from tests.redfish.simlab import PASSWORD_VAR, SimProcess, new_password


@dataclass(frozen=True)
class Lab:
    sim: SimProcess
    site: Path
    password: str
    common: list[str]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    d = tmp_path_factory.mktemp("fwcli")
    password = new_password()
    mp = pytest.MonkeyPatch()
    mp.setenv(PASSWORD_VAR, password)
    site = write_site(d, 5, sim=OFF, rollout={"canary": 1, "batch_size": 4})
    try:
        with SimProcess(site, password, d / "run", power_delay_ms=50) as sim:
            yield Lab(sim, site, password, ["--site", str(site), "--db", str(d / "state.db")])
    finally:
        mp.undo()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_inventory_plan_apply_and_status_from_the_command_line(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    common = lab.common
    code, out = cli(capsys, "firmware", "inventory", *common, "--retries", "0")
    assert code == 2
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


@pytest.fixture
def images(tmp_path: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_sushy_updates_firmware_through_a_task_monitor_and_sets_bios_on_reset(
        lab: Lab, tmp_path: Path, images: str) -> None:
    sushy = pytest.importorskip("sushy", reason="the sushy client library is not installed")
    pin = image(tmp_path, "bios", "1.16.0")
    password, sim = lab.password, lab.sim
    bmc = load_site(lab.site).hosts()[0].bmc
    auth = sushy.auth.SessionOrBasicAuth(username="root", password=password)
    with auth:
        root = sushy.Sushy(f"https://{bmc.address}:{bmc.port}/redfish/v1", auth=auth, verify=False)
        updates = root.get_update_service()
        monitor = updates.simple_update(f"{images}/{pin['file']}")
        assert monitor.is_processing
        monitor.wait(20)
        task = monitor.get_task()
        assert task.task_state == sushy.TASK_STATE_COMPLETED
        system = root.get_system("/redfish/v1/Systems/System.Embedded.1")
        bios = system.bios
        assert set(bios.supported_apply_times) == {sushy.APPLY_TIME_ON_RESET, sushy.APPLY_TIME_MAINT_START,
                                                   sushy.APPLY_TIME_MAINT_RESET}
        assert bios.attributes["ProcCStates"] == "Disabled"  # h00 runs its baseline
        bios.set_attributes({"ProcCStates": "Enabled"}, apply_time=sushy.APPLY_TIME_ON_RESET)
        bios.refresh()
        assert bios.pending_attributes == {"ProcCStates": "Enabled"}
        system.reset_system(sushy.RESET_ON)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and system.power_state != sushy.POWER_STATE_ON:
            time.sleep(0.05)
            system.refresh()
        bios.refresh()
        assert bios.attributes["ProcCStates"] == "Enabled" and bios.pending_attributes == {}
        inventory = updates.firmware_inventory
        versions = {m.identity: m.version for m in inventory.get_members()}
        assert any(k.endswith("__BIOS.Setup.1-1") and v == "1.16.0" for k, v in versions.items())
    root._auth = None  # closed above; nothing left for __del__
    assert sim.hosts()["h00"]["sessions"] == 0
