"""The FirmwareInventory and Bios parsers on real crawls: NVIDIA GB300 (Supermicro) and the HPE iLO emulator
(DL380a), both via spyroot/idrac_ctl (MIT; tests/fixtures/redfish/firmware/SOURCE.md)."""

from __future__ import annotations

from collections import Counter
from typing import get_args

from provision.firmware.bios_resource import parse_bios
from provision.firmware.components import Kind, parse_component, parse_components
from provision.firmware.drift import judge, version_key
from provision.site.firmware import ComponentKind, ComponentPin, FirmwareBaseline
from tests.firmware.realdata import inventory_members, load

GB300 = "supermicro_gb300"
HPE = "hpe_ilo_emulator"


def test_the_site_model_and_the_parser_know_the_same_component_kinds() -> None:
    assert set(get_args(ComponentKind)) == {k.value for k in Kind}


def test_a_gb300_inventory_is_sorted_into_bios_bmc_hca_nic_gpu_cpld_and_the_hgx_baseboard() -> None:
    comps = {c.id: c for c in parse_components(inventory_members(GB300))}
    assert len(comps) == 29
    kinds = {rid: c.kind for rid, c in comps.items()}
    assert kinds["AB86B73D_8D56_41E4_971E_B11DB71F2E33"] is Kind.bios  # named "BIOS Firmware"
    assert kinds["FW_BMC_0"] is Kind.bmc
    assert kinds["CX8_0"] is Kind.hca and kinds["NIC_1"] is Kind.nic
    assert kinds["HGX_FW_GPU_0"] is Kind.gpu and kinds["HGX_InfoROM_GPU_3"] is Kind.gpu
    assert kinds["FW_CPLD_0"] is Kind.cpld and kinds["HGX_FW_CPLD_0"] is Kind.cpld
    for rid in ("HGX_FW_BMC_0", "HGX_FW_ERoT_BMC_0", "HGX_FW_FPGA_0", "HGX_PCIeSwitchConfig_0", "HGX_FW_CPU_0"):
        assert kinds[rid] is Kind.baseboard, rid
    assert Counter(kinds.values())[Kind.gpu] == 8
    bios = comps["AB86B73D_8D56_41E4_971E_B11DB71F2E33"]
    assert (bios.version, bios.updateable, bios.manufacturer) == ("2.1b", False, "Supermicro")
    gpu = comps["HGX_FW_GPU_0"]
    assert (gpu.version, gpu.updateable, gpu.related) == ("97.10.3E.00.05", True, ("/redfish/v1/Chassis/HGX_GPU_0",))
    assert comps["FW_BMC_0"].related == ("/redfish/v1/Managers/BMC_0",)


def test_hpe_ilo_components_are_told_apart_by_their_description() -> None:
    comps = {c.id: c for c in parse_components(inventory_members(HPE))}
    assert {rid: (c.kind, c.version) for rid, c in comps.items()} == {
        "1": (Kind.bmc, "1.66 Dec 13 2024"), "2": (Kind.bios, "U58 v2.44 (01/17/2025)"),
        "3": (Kind.other, "11.7.0 Build 23"), "4": (Kind.cpld, "0x16")}
    assert comps["1"].name == "iLO 6" and comps["2"].name == "System ROM"


def test_dell_ids_carry_the_slot_after_the_version_and_only_installed_images_count() -> None:
    """Id grammar from REFERENCE-wave3 B4 (akaliwod/iserver R650 crawl, openmanage idrac_gather_facts)."""
    members = [
        {"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/Installed-159-1.2.4__BIOS.Setup.1-1",
         "Id": "Installed-159-1.2.4__BIOS.Setup.1-1", "Name": "BIOS", "Version": "1.2.4", "Updateable": True},
        {"Id": "Previous-159-1.1.0__BIOS.Setup.1-1", "Name": "BIOS", "Version": "1.1.0", "Updateable": True},
        {"Id": "Current-159-1.2.4__BIOS.Setup.1-1", "Name": "BIOS", "Version": "1.2.4", "Updateable": True},
        {"Id": "Installed-25227-5.10.00.00__iDRAC.Embedded.1-1", "Name": "Integrated Dell Remote Access Controller",
         "Version": "5.10.00.00", "Updateable": True},
        {"Id": "Installed-0-22.36.10.10__InfiniBand.Slot.31-1", "Name": "Mellanox ConnectX-7 Single Port",
         "Version": "28.39.1002", "Updateable": True},
        {"Id": "Installed-0-22.36.10.10__PSU.Slot.1", "Name": "Power Supply.Slot.1", "Version": "00.1D.7D",
         "Updateable": True},
    ]
    comps = parse_components(members)
    assert [(c.key, c.kind) for c in comps] == [("BIOS.Setup.1-1", Kind.bios), ("iDRAC.Embedded.1-1", Kind.bmc),
                                                ("InfiniBand.Slot.31-1", Kind.hca), ("PSU.Slot.1", Kind.psu)]
    assert parse_component({"Id": "Available-1-2__NIC.Slot.1-1"}) is None


def test_hostile_text_in_a_member_is_escaped_and_bounded() -> None:
    comp = parse_component({"Id": "X\x1b[31m", "Name": "n" * 500, "Version": "1\n2", "Updateable": "yes"})
    assert comp is not None
    assert "\x1b" not in comp.id and comp.version == "1\\n2" and len(comp.name) <= 130
    assert comp.updateable is False  # only JSON true is updateable


def test_bios_attributes_and_settings_object_of_both_crawls() -> None:
    gb = load(GB300, "_redfish_v1_Systems_System_0_Bios.json")
    state = parse_bios(gb, gb["@odata.id"])
    assert len(state.attributes) == 360
    assert state.attributes["ActiveCores"] == 144 and state.attributes["EGM"] is True
    assert state.settings_path == "/redfish/v1/Systems/System_0/Bios/Settings" and state.apply_times == ()
    hpe = parse_bios(load(HPE, "_redfish_v1_Systems_1_Bios.json"), "/redfish/v1/systems/1/bios/")
    assert hpe.registry == "BiosAttributeRegistryU58.v1_2_44"
    assert hpe.attributes["WorkloadProfile"] == "I/OThroughput" and hpe.settings_path == "/redfish/v1/systems/1/bios/settings/"


def test_vendor_version_strings_order_as_their_numbers_do() -> None:
    assert version_key("2.19.10") > version_key("2.19.9")
    assert version_key("U58 v2.44 (01/17/2025)") > version_key("U58 v2.40 (05/02/2024)")
    assert version_key("28.43.1014") > version_key("28.42.1000")
    assert version_key("1.66 Dec 13 2024") > version_key("1.66")


def test_drift_on_the_gb300_crawl_names_component_seen_and_wanted() -> None:
    comps = parse_components(inventory_members(GB300))
    bios = load(GB300, "_redfish_v1_Systems_System_0_Bios.json")
    baseline = FirmwareBaseline(
        components=[ComponentPin(kind="bios", version="2.1b"), ComponentPin(kind="hca", min_version="40.46.1000"),
                    ComponentPin(kind="gpu", id="HGX_FW_GPU_*", version="97.10.3E.00.05"),
                    ComponentPin(kind="psu", min_version="1.0")],
        bios={"Above4GDecoding": "Enabled", "ActiveCores": 144, "EGM": False, "NoSuchAttribute": "On"})
    judged = judge(baseline, comps, parse_bios(bios, bios["@odata.id"]))
    assert [(d.component, d.seen, d.wanted) for d in judged.firmware] == [
        (f"CX8_{i}", "40.45.3048", ">= 40.46.1000") for i in range(4)] + [("psu", None, ">= 1.0")]
    assert [(d.component, d.seen, d.wanted) for d in judged.bios] == [("EGM", "true", "false"),
                                                                       ("NoSuchAttribute", None, "On")]
    assert not judged.on_baseline
    assert judge(FirmwareBaseline(components=[ComponentPin(kind="bios", version="2.1b")]), comps, None).on_baseline


def test_a_part_that_could_not_be_read_is_unknown_not_on_baseline() -> None:
    baseline = FirmwareBaseline(components=[ComponentPin(kind="bmc", min_version="1")], bios={"SysProfile": "X"})
    judged = judge(baseline, None, None)
    assert not judged.on_baseline and judged.unknown == ("firmware inventory not read", "BIOS attributes not read")


def test_which_update_action_each_real_update_service_offers() -> None:
    """HPE iLO offers SimpleUpdate (HTTP, HTTPS); the GB300's NVIDIA BMC offers only MultipartHttpPushUri (and OEM
    actions): `firmware apply` pushes the image there (provision/firmware/multipart.py)."""
    from provision.firmware.read import multipart_push_target, simple_update_target

    hpe = load(HPE, "_redfish_v1_UpdateService.json")
    assert simple_update_target(hpe) == "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
    gb = load(GB300, "_redfish_v1_UpdateService.json")
    assert simple_update_target(gb) is None
    assert multipart_push_target(gb) == "/redfish/v1/UpdateService/update-multipart"
    assert multipart_push_target(hpe) is None  # iLO's HttpPushUri (/cgi-bin/uploadFile) is no multipart push
