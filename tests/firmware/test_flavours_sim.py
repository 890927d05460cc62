"""The simulator's HPE iLO and NVIDIA HGX firmware shapes against the real crawls they copy, and the client's
inventory and apply against them: GPU VBIOS through the HGX UpdateService's multipart push with Targets, an iLO's
SimpleUpdate followed through `UpdateService.Oem.Hpe.State`.

Sources: tests/fixtures/redfish/firmware/supermicro_gb300 (real GB300 crawl, spyroot/idrac_ctl, MIT) and
hpe_ilo_emulator (HPE iLO emulator DL380a, same repository); the HGX 8-GPU NVSwitch ids from the HGX H100 target
list of HPE's Cray XD670 update module (REFERENCE-wave3 B4, sim/redfish/firmware_flavours.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.bios.step import apply_bios
from provision.firmware.components import Kind, parse_components
from provision.firmware.read import hpe_progress, multipart_push_target, simple_update_target
from sim.redfish.firmware_config import DEFAULT_VERSIONS
from sim.redfish.firmware_flavours import Flavour, components, member, targets_of, update_service
from sim.redfish.server import Simulator
from tests.firmware.lab import image
from tests.firmware.realdata import load as real
from tests.firmware.test_apply_sim import FAST, inventory_then, lab, run

GPU_PIN = "HGX_FW_GPU_0"
OLD_VBIOS = "96.00.A5.00.1A"
NEW_VBIOS = "97.10.3E.00.05"


def _keys(data: dict[str, Any]) -> set[str]:
    return {k for k in data if not k.startswith("@odata.")}


def test_hgx_inventory_members_and_update_service_have_the_gb300_crawls_shape() -> None:
    comps = components(Flavour.hgx, dict(DEFAULT_VERSIONS), 4, 8, "NVIDIA H200")
    ids = [c.rid for c in comps]
    assert {"FW_BMC_0", "HGX_FW_BMC_0", "HGX_FW_GPU_7", "HGX_InfoROM_GPU_7", "CX8_3", "HGX_FW_NVSwitch_3"} <= set(ids)
    gpu = next(c for c in comps if c.rid == "HGX_FW_GPU_0")
    ours = member(Flavour.hgx, gpu, f"/redfish/v1/UpdateService/FirmwareInventory/{gpu.rid}", None)
    theirs = real("supermicro_gb300", "_redfish_v1_UpdateService_FirmwareInventory_HGX_FW_GPU_0.json")
    assert _keys(ours) <= _keys(theirs) and ours["RelatedItem"] == [{"@odata.id": "/redfish/v1/Chassis/HGX_GPU_0"}]
    assert set(ours["Oem"]["Nvidia"]) - {"@odata.type"} <= set(theirs["Oem"]["Nvidia"])
    service = update_service(Flavour.hgx, simple=True, hpe=None)
    crawl = real("supermicro_gb300", "_redfish_v1_UpdateService.json")
    assert simple_update_target(service) is simple_update_target(crawl) is None  # HGX: no SimpleUpdate
    assert multipart_push_target(service) == multipart_push_target(crawl) == "/redfish/v1/UpdateService/update-multipart"
    assert service["MultipartHttpPushUri@Redfish.OperationApplyTimeSupport"]["SupportedValues"] == \
        crawl["MultipartHttpPushUri@Redfish.OperationApplyTimeSupport"]["SupportedValues"]
    # the client classifies the simulated members as it classifies the crawl's
    kinds = {c.id: c.kind for c in parse_components([member(Flavour.hgx, c, f"/x/{c.rid}", None) for c in comps])}
    assert (kinds["HGX_FW_GPU_0"], kinds["HGX_InfoROM_GPU_0"], kinds["HGX_FW_NVSwitch_0"], kinds["CX8_0"],
            kinds["FW_BMC_0"]) == (Kind.gpu, Kind.gpu, Kind.baseboard, Kind.hca, Kind.bmc)


def test_ilo_inventory_members_and_update_service_have_the_ilo_emulators_shape() -> None:
    comps = components(Flavour.ilo, dict(DEFAULT_VERSIONS), 2, 2, "NVIDIA H200")
    for n, fixture in ((1, "_redfish_v1_UpdateService_FirmwareInventory_1.json"),
                       (2, "_redfish_v1_UpdateService_FirmwareInventory_2.json")):
        ours = member(Flavour.ilo, comps[n - 1], f"/redfish/v1/UpdateService/FirmwareInventory/{n}", None)
        theirs = real("hpe_ilo_emulator", fixture)
        assert (ours["Id"], ours["Name"], ours["Description"]) == (theirs["Id"], theirs["Name"], theirs["Description"])
    service = update_service(Flavour.ilo, simple=True, hpe=None)
    crawl = real("hpe_ilo_emulator", "_redfish_v1_UpdateService.json")
    assert simple_update_target(service) == simple_update_target(crawl)
    assert multipart_push_target(service) is multipart_push_target(crawl) is None
    assert hpe_progress(service) and hpe_progress(crawl)  # Oem.Hpe.State, "Idle" in the crawl
    kinds = [c.kind for c in parse_components([member(Flavour.ilo, c, f"/x/{c.rid}", None) for c in comps])]
    assert kinds[:2] == [Kind.bmc, Kind.bios] and kinds.count(Kind.hca) == 2 and kinds.count(Kind.gpu) == 2


def test_gpu_vbios_goes_through_the_hgx_push_to_the_targets_the_baseline_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pin = {"kind": "gpu", "id": GPU_PIN, "version": NEW_VBIOS, "image": image(tmp_path, "gpu", NEW_VBIOS)}
    bmc = {"kind": "bmc", "min_version": "7.10.30.00", "image": image(tmp_path, "bmc", "7.10.30.00")}
    sim_file = {"flavour": {"h00": "hgx", "h01": "hgx", "h02": "hgx"}, "installed": {"h00": {"gpu": OLD_VBIOS},
                                                                                 "h02": {"bmc": "7.00.00.00"}},
                "bios": {"h01": {"ProcCStates": "Enabled"}}}
    baseline = {"components": [pin, bmc], "bios": {"ProcCStates": "Disabled"}}
    site, store = lab(tmp_path, monkeypatch, sim_file, hosts=3, canary=0, baseline=baseline)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        assert [h.host for h in result.plan.hosts] == ["h00", "h02"] and result.plan.hosts[0].updates[0].targeted
        done, own = result.results
        assert done.ok and own.ok, result.results
        # the BMC's own image (no id pinned: no Targets) goes to FW_BMC_0, not to the HGX baseboard's BMC
        fw2 = sim.bmcs["h02"].firmware
        assert fw2 is not None and (fw2.components["FW_BMC_0"].version, fw2.components["HGX_FW_BMC_0"].version) == (
            "7.10.30.00", DEFAULT_VERSIONS["baseboard"])
        assert "bmc_back_after_s" in own.data["updates"][0] and sim.bmcs["h02"].resets == []
        update = done.data["updates"][0]
        assert (update["via"], update["state"], update["percent"]) == ("MultipartHttpPushUri", "Completed", 100)
        fw = sim.bmcs["h00"].firmware
        assert fw is not None and fw.updates == ["update-multipart"]
        versions = {k: c.version for k, c in fw.components.items()}
        # only the target: the other GPU keeps its VBIOS, the InfoROMs are no VBIOS
        assert (versions["HGX_FW_GPU_0"], versions["HGX_FW_GPU_1"]) == (NEW_VBIOS, OLD_VBIOS)
        assert versions["HGX_InfoROM_GPU_0"] == DEFAULT_VERSIONS["inforom"]
        assert sim.bmcs["h00"].resets == ["On"]  # activated by the reboot, then read back
        bios = await apply_bios(site, store, site.hosts(), FAST)  # the GB300's Bios lists no apply times
        assert [(r.host, r.ok, r.data.get("apply_time")) for r in bios.results] == [("h01", True, None)], bios.results
        assert sim.bmcs["h01"].firmware is not None and sim.bmcs["h01"].firmware.bios["ProcCStates"] == "Disabled"

    run(site, store, tmp_path, body)


def test_hgx_targets_must_name_the_bmcs_own_inventory() -> None:
    comps = components(Flavour.hgx, dict(DEFAULT_VERSIONS), 0, 2, "NVIDIA H200")
    inventory = "/redfish/v1/UpdateService/FirmwareInventory"
    assert targets_of([], comps) is None  # none named: every component the image is for
    named = targets_of([f"{inventory}/HGX_FW_GPU_1/"], comps)
    assert isinstance(named, list) and [c.rid for c in named] == ["HGX_FW_GPU_1"]
    assert targets_of([f"{inventory}/HGX_FW_GPU_7"], comps) == (
        f"The value {inventory}/HGX_FW_GPU_7 for the parameter Targets is not in the list of acceptable values.")
    assert targets_of("HGX_FW_GPU_0", comps) == "Targets must be a list of URIs"


def test_ilo_simple_update_is_followed_through_its_hpe_state_and_its_own_update_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sim_file = {"flavour": {"h00": "ilo", "h01": "ilo", "h02": "ilo"},
                "installed": {"h00": {"bios": "1.14.1"}, "h01": {"bmc": "7.00.00.00"}},
                "bios": {"h02": {"ProcCStates": "Enabled"}}}
    site, store = lab(tmp_path, monkeypatch, sim_file, hosts=3, canary=0)

    async def body(sim: Simulator) -> None:
        result = await inventory_then(site, store, "firmware")
        assert [r.host for r in result.results if r.ok] == ["h00", "h01"], result.results
        by_host = {r.host: r.data["updates"][0] for r in result.results}
        assert by_host["h00"]["task"] == "/redfish/v1/UpdateService" and by_host["h00"]["state"] == "Completed"
        assert by_host["h01"]["state"] in ("Completed", "BmcRestarting") and "bmc_back_after_s" in by_host["h01"]
        fw0, fw1 = sim.bmcs["h00"].firmware, sim.bmcs["h01"].firmware
        assert fw0 is not None and fw1 is not None
        assert (fw0.components["2"].version, fw1.components["1"].version) == ("1.15.0", "7.10.30.00")
        assert fw0.tasks and fw0.hpe.state == "Complete"
        bios = await apply_bios(site, store, site.hosts(), FAST)  # PATCHed to iLO's .../Bios/settings
        fw2 = sim.bmcs["h02"].firmware
        assert fw2 is not None and [(r.host, r.ok) for r in bios.results] == [("h02", True)] and fw2.patches == 1
        assert fw2.bios["ProcCStates"] == "Disabled"

    run(site, store, tmp_path, body)
