"""Inventory parsing and the PXE NIC choice, on real iDRAC9 captures and on edge cases."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from provision.bmc.harvest import HostInventory, check_inventory, find_system, harvest
from provision.bmc.inventory import (
    Nic,
    PxeDevice,
    choose_pxe_nic,
    parse_bios_pxe,
    parse_ethernet_interface,
    parse_network_device_function,
    parse_system,
)
from provision.bmc.triage import HostProblem
from provision.redfish import ClientOptions, RedfishClient
from provision.site.credentials import Login, Secret
from provision.site.model import GpuSpec, HostClass

REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "2_redfish"
IDRAC = REALDATA / "dell_idrac9_r650"
needs_realdata = pytest.mark.skipif(not IDRAC.is_dir(), reason=f"real iDRAC captures not present at {IDRAC}")

R650_MACS = {
    "NIC.Integrated.1-1-1": "b8:ce:f6:94:f0:b8",
    "NIC.Integrated.1-2-1": "b8:ce:f6:94:f0:b9",
    "NIC.Embedded.1-1-1": "70:b5:e8:f0:25:52",
    "NIC.Embedded.2-1-1": "70:b5:e8:f0:25:53",
}


def load(name: str) -> Any:
    return json.loads((IDRAC / name).read_text())


def capture_transport(directory: Path, root: dict[str, Any], *, moved: dict[str, str] | None = None,
                      extra: dict[str, Any] | None = None, seen: list[str] | None = None) -> httpx.MockTransport:
    """Serve the captured files by URL path (`/redfish/v1/A/B` → `redfish_v1_A_B.json`), 404 otherwise.
    `moved` serves a capture at another path (the captured path then 404s); `extra` adds resources."""
    moved = moved or {}
    gone = set(moved.values())

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if seen is not None:
            seen.append(path)
        if path == "/redfish/v1":
            return httpx.Response(200, json=root)
        if extra and path in extra:
            return httpx.Response(200, json=extra[path])
        path = moved.get(path, "" if path in gone else path)
        file = directory / (path.strip("/").replace("/", "_") + ".json")
        if file.exists():
            return httpx.Response(200, content=file.read_bytes(), headers={"Content-Type": "application/json"})
        return httpx.Response(404, json={"error": {"@Message.ExtendedInfo": [{"Message": "not captured"}]}})

    return httpx.MockTransport(handler)


@pytest.mark.realdata
@needs_realdata
def test_harvest_reads_the_real_r650_captures() -> None:
    root = {"@odata.id": "/redfish/v1", "Vendor": "Dell", "Systems": {"@odata.id": "/redfish/v1/Systems"}}

    async def go() -> HostInventory:
        bmc = RedfishClient("https://idrac.test", Login("root", Secret("x")), options=ClientOptions(auth="basic"),
                            transport=capture_transport(IDRAC, root))
        async with bmc:
            system = await find_system(bmc)
            return await harvest(bmc, HostClass(pxe_nic="NIC.Integrated.1-1-1"), system)

    inv = asyncio.run(go())
    assert {n.id: n.mac for n in inv.nics} == R650_MACS
    assert inv.pxe.nic is not None and inv.pxe.nic.mac == "b8:ce:f6:94:f0:b8"
    assert inv.pxe.source == "site:NIC.Integrated.1-1-1"
    assert inv.system.serial == "YGFCBTJSO8WOMR"
    assert inv.system.service_tag == "U8OIL5X"
    assert inv.system.model == "PowerEdge R650"
    assert inv.system.bios_version == "1.2.4"
    assert inv.system.power_state == "On"
    assert inv.system.health_rollup == "OK"
    assert inv.bmc_firmware == "5.10.00.00"
    # The adapters were read at the iDRAC's own path (the chassis itself was not captured): every
    # NIC's MAC agrees with its NetworkDeviceFunction, the FC functions have none to compare.
    assert inv.cross_check == {"checked": True, "mismatches": [], "not_in_chassis": []}
    assert inv.functions is not None and {f.id for f in inv.functions} >= set(R650_MACS)
    assert inv.notes == ("BIOS: Not Found",)  # BIOS attributes were not captured
    link = {n.id: n.link_up for n in inv.nics}
    assert link["NIC.Integrated.1-1-1"] is True and link["NIC.Embedded.1-1-1"] is False


@pytest.mark.realdata
@needs_realdata
def test_network_adapters_not_at_the_idrac_path_are_found_through_the_chassis_link() -> None:
    adapters = "/redfish/v1/Chassis/System.Embedded.1/NetworkAdapters"
    root = {"@odata.id": "/redfish/v1", "Vendor": "Dell", "Systems": {"@odata.id": "/redfish/v1/Systems"}}
    chassis = {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1", "Id": "System.Embedded.1",
               "NetworkAdapters": {"@odata.id": "/redfish/v1/Chassis/System.Embedded.1/Adapters"}}
    seen: list[str] = []

    async def go() -> HostInventory:
        transport = capture_transport(IDRAC, root, moved={f"{chassis['@odata.id']}/Adapters": adapters},
                                      extra={chassis["@odata.id"]: chassis}, seen=seen)
        async with RedfishClient("https://idrac.test", Login("root", Secret("x")), options=ClientOptions(auth="basic"),
                                 transport=transport) as bmc:
            return await harvest(bmc, HostClass(pxe_nic="NIC.Integrated.1-1-1"))

    inv = asyncio.run(go())
    assert seen.index(adapters) < seen.index(chassis["@odata.id"])  # the iDRAC path first, then the link
    assert inv.cross_check == {"checked": True, "mismatches": [], "not_in_chassis": []}


@pytest.mark.realdata
@needs_realdata
def test_network_device_functions_agree_with_ethernet_interfaces_on_the_r650() -> None:
    base = "redfish_v1_Chassis_System.Embedded.1_NetworkAdapters_"
    funcs = [
        parse_network_device_function(load(f"{base}NIC.Integrated.1_NetworkDeviceFunctions_NIC.Integrated.1-1-1.json")),
        parse_network_device_function(load(f"{base}NIC.Integrated.1_NetworkDeviceFunctions_NIC.Integrated.1-2-1.json")),
        parse_network_device_function(load(f"{base}NIC.Embedded.1_NetworkDeviceFunctions_NIC.Embedded.1-1-1.json")),
    ]
    for f in funcs:
        assert f.kind == "Ethernet"
        assert f.mac == R650_MACS[f.id]
    fc = parse_network_device_function(load(f"{base}FC.Slot.1_NetworkDeviceFunctions_FC.Slot.1-1.json"))
    assert fc.mac is None  # Fibre Channel: no Ethernet MAC to harvest


@pytest.mark.realdata
@pytest.mark.skipif(not (REALDATA / "hpe_ilo_emulator").is_dir(), reason="HPE captures not present")
def test_a_non_dell_system_has_no_service_tag_and_its_nics_parse() -> None:
    d = REALDATA / "hpe_ilo_emulator"
    system = parse_system(json.loads((d / "_redfish_v1_Systems_1.json").read_text()))
    assert system.service_tag is None and system.serial
    nic = parse_ethernet_interface(json.loads((d / "_redfish_v1_Systems_1_EthernetInterfaces_77.json").read_text()))
    assert nic.mac is not None and nic.id == "77"


def nic(fqdd: str, mac: str | None = "02:00:00:00:00:01", link: str | None = "LinkUp") -> Nic:
    return Nic(fqdd, mac, mac, link, 25000, True, None)


NICS = (nic("NIC.Embedded.1-1-1", "02:00:00:00:00:01", "LinkDown"), nic("NIC.Integrated.1-1-1", "02:00:00:00:00:02"),
        nic("NIC.Slot.3-1-1", "02:00:00:00:00:03"))


def test_bios_pxe_device_wins_over_the_site_rule() -> None:
    devices = parse_bios_pxe({"PxeDev1EnDis": "Disabled", "PxeDev1Interface": "NIC.Integrated.1-1-1",
                              "PxeDev2EnDis": "Enabled", "PxeDev2Interface": "NIC.Slot.3-1-1", "Other": 1})
    assert devices == (PxeDevice(1, "NIC.Integrated.1-1-1", False), PxeDevice(2, "NIC.Slot.3-1-1", True))
    choice = choose_pxe_nic(NICS, devices, "NIC.Integrated.1-1-1")
    assert choice.nic is not None and choice.nic.id == "NIC.Slot.3-1-1" and choice.source == "bios:PxeDev2"
    assert choice.problem is None


def test_bios_naming_an_absent_nic_is_no_pxe_nic() -> None:
    choice = choose_pxe_nic(NICS, (PxeDevice(1, "NIC.Slot.9-1-1", True),), None)
    assert choice.problem == "no_pxe_nic" and "NIC.Slot.9-1-1" in choice.detail


def test_site_fqdd_is_used_when_the_bios_enables_none_and_must_exist() -> None:
    off = (PxeDevice(1, "NIC.Integrated.1-1-1", False),)
    good = choose_pxe_nic(NICS, off, "NIC.Integrated.1-1-1")
    assert good.nic is not None and good.nic.mac == "02:00:00:00:00:02" and good.source == "site:NIC.Integrated.1-1-1"
    missing = choose_pxe_nic(NICS, off, "NIC.Integrated.2-1-1")
    assert missing.problem == "no_pxe_nic" and "BIOS enables no PXE device" in missing.detail


def test_pxe_nic_with_link_down_is_named() -> None:
    choice = choose_pxe_nic(NICS, (), "NIC.Embedded.1-1-1")
    assert choice.problem == "pxe_nic_link_down" and "LinkDown" in choice.detail


def test_without_bios_or_fqdd_the_first_onboard_nic_with_link_is_chosen() -> None:
    choice = choose_pxe_nic(NICS, (), None)
    assert choice.nic is not None and choice.nic.id == "NIC.Integrated.1-1-1"
    down = choose_pxe_nic((NICS[0],), (), None)
    assert down.problem == "pxe_nic_link_down"
    assert choose_pxe_nic((), (), None).problem == "no_pxe_nic"
    unknown = choose_pxe_nic((nic("aa", "02:00:00:00:00:09", None),), (), None)
    assert unknown.problem is None and unknown.nic is not None and "no link status" in unknown.detail


def test_gpu_count_below_the_host_class_is_unexpected_hardware() -> None:
    from provision.bmc.inventory import PxeChoice, SystemInfo

    inv = HostInventory(
        system=SystemInfo("S", None, None, None, None, None, "On", "OK", "OK", None), nics=NICS, functions=None,
        pxe_devices=(), pxe=PxeChoice(NICS[1], "site:x", None, ""), bmc_firmware=None, gpus=7, ib_functions=None,
        cross_check={}, notes=(), raw={})
    with pytest.raises(HostProblem) as info:
        check_inventory(inv, HostClass(gpu=GpuSpec(model="H100", count=8)))
    assert info.value.reason == "unexpected_hardware" and "7 GPUs" in info.value.detail
    check_inventory(inv, HostClass(gpu=GpuSpec(model="H100", count=7)))


def test_missing_fields_are_clear_errors_or_unknowns_not_crashes() -> None:
    from provision.redfish import RedfishProtocolError

    root = {"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"}}
    bare_system = {"@odata.id": "/redfish/v1/Systems/1", "Id": "1"}  # no EthernetInterfaces, no Status...

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if path == "/redfish/v1":
            return httpx.Response(200, json=root)
        if path == "/redfish/v1/Systems":
            return httpx.Response(200, json={"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]})
        return httpx.Response(200, json=bare_system)

    async def go() -> None:
        async with RedfishClient("https://bmc.test", Login("root", Secret("x")), options=ClientOptions(auth="basic"),
                                 transport=httpx.MockTransport(handler)) as bmc:
            await harvest(bmc, HostClass())

    with pytest.raises(RedfishProtocolError, match="no EthernetInterfaces link"):
        asyncio.run(go())
    assert parse_system({}).serial is None and parse_system({"Status": "garbage"}).health is None
    no_mac = parse_ethernet_interface({"Id": "NIC.Slot.1-1-1", "SpeedMbps": "fast", "LinkStatus": 7})
    assert no_mac.mac is None and no_mac.speed_mbps is None and no_mac.link is None
    assert choose_pxe_nic((no_mac,), (), "NIC.Slot.1-1-1").problem == "no_pxe_nic"


# Supermicro GB300 (Redfish 1.17): the ComputerSystem has no EthernetInterfaces, the NICs are only chassis
# NetworkAdapters' Ports. Real crawl in tests/fixtures (MIT, SOURCE.md there); the collections it lacks are glue.
GB300 = Path(__file__).resolve().parents[1] / "fixtures" / "redfish" / "supermicro_gb300"
_CX8 = "/redfish/v1/Chassis/IO_Board_0/NetworkAdapters/IO_Board_0_CX8_0"
_BF3 = "/redfish/v1/Chassis/Riser_Slot2_BlueField_3_Card/NetworkAdapters/Riser_Slot2_BlueField_3_Card"
_GB300_GLUE: dict[str, Any] = {
    "/redfish/v1": {"@odata.id": "/redfish/v1", "Vendor": "Supermicro", "RedfishVersion": "1.17.0",
                    "Systems": {"@odata.id": "/redfish/v1/Systems"}, "Chassis": {"@odata.id": "/redfish/v1/Chassis"}},
    "/redfish/v1/Systems": {"Members": [{"@odata.id": "/redfish/v1/Systems/System_0"}]},
    "/redfish/v1/Chassis": {"Members": [{"@odata.id": f"/redfish/v1/Chassis/{c}"} for c in (
        "BMC_0", "IO_Board_0", "Riser_Slot2_BlueField_3_Card")]},
    "/redfish/v1/Chassis/BMC_0": {"@odata.id": "/redfish/v1/Chassis/BMC_0", "Id": "BMC_0"},
    "/redfish/v1/Chassis/IO_Board_0": {"@odata.id": "/redfish/v1/Chassis/IO_Board_0", "Id": "IO_Board_0",
                                       "NetworkAdapters": {"@odata.id": "/redfish/v1/Chassis/IO_Board_0/NetworkAdapters"}},
    "/redfish/v1/Chassis/Riser_Slot2_BlueField_3_Card": {
        "@odata.id": "/redfish/v1/Chassis/Riser_Slot2_BlueField_3_Card", "Id": "Riser_Slot2_BlueField_3_Card",
        "NetworkAdapters": {"@odata.id": "/redfish/v1/Chassis/Riser_Slot2_BlueField_3_Card/NetworkAdapters"}},
    "/redfish/v1/Chassis/Riser_Slot2_BlueField_3_Card/NetworkAdapters": {"Members": [{"@odata.id": _BF3}]},
    f"{_CX8}/Ports": {"Members": [{"@odata.id": f"{_CX8}/Ports/Port_0"}]},
    f"{_BF3}/Ports": {"Members": [{"@odata.id": f"{_BF3}/Ports/Port_0"}]},
}


def _gb300_transport(edits: dict[str, dict[str, Any]] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        file = GB300 / (path.replace("/", "_") + ".json")
        body = _GB300_GLUE.get(path) or (json.loads(file.read_text()) if file.is_file() else None)
        if body is None:  # e.g. IO_Board_0_CX8_1, listed by the crawl's collection but not captured
            return httpx.Response(404, json={"error": {"@Message.ExtendedInfo": [{"Message": "not captured"}]}})
        return httpx.Response(200, json={**body, **(edits or {}).get(path, {})})

    return httpx.MockTransport(handler)


def _gb300(host_class: HostClass, edits: dict[str, dict[str, Any]] | None = None) -> HostInventory:
    async def go() -> HostInventory:
        async with RedfishClient("https://bmc.test", Login("root", Secret("x")), options=ClientOptions(auth="basic"),
                                 transport=_gb300_transport(edits)) as bmc:
            return await harvest(bmc, host_class)

    return asyncio.run(go())


def test_gb300_without_ethernet_interfaces_reads_the_chassis_ports_and_says_where_it_looked() -> None:
    # Before: RedfishProtocolError "the ComputerSystem has no EthernetInterfaces link" (bmc_bad_response).
    inv = _gb300(HostClass())
    assert {n.id: (n.mac, n.link) for n in inv.nics} == {
        "IO_Board_0_CX8_0/Port_0": (None, "LinkDown"),
        "Riser_Slot2_BlueField_3_Card/Port_0": (None, "LinkDown"),
    }
    assert inv.system.model == "GB NVL" and inv.system.serial == "S964512X5913271"
    assert inv.pxe.problem == "no_pxe_nic"
    for where in (_CX8, _BF3, "IO_Board_0_CX8_1: ", "/redfish/v1/Chassis/BMC_0: no NetworkAdapters",
                  "no EthernetInterfaces"):
        assert where in inv.pxe.detail, where
    with pytest.raises(HostProblem) as info:
        check_inventory(inv, HostClass())
    assert info.value.reason == "no_pxe_nic"
    assert info.value.evidence["raw"]["chassis_nics"]["looked"]


def test_gb300_port_and_function_macs_are_harvested_from_the_chassis() -> None:
    port = f"{_CX8}/Ports/Port_0"
    edits: dict[str, dict[str, Any]] = {port: {"LinkStatus": "LinkUp", "CurrentSpeedGbps": 400.0,
                    "Ethernet": {"AssociatedMACAddresses": ["7C:C2:55:90:51:3A"]}},
             _BF3: {"NetworkDeviceFunctions": {"Members": [{
                 "@odata.id": f"{_BF3}/NetworkDeviceFunctions/BF3_0", "Id": "BF3_0", "NetDevFuncType": "Ethernet",
                 "Ethernet": {"MACAddress": "58:A2:E1:00:00:01"}}]}}}
    inv = _gb300(HostClass(), edits)
    macs = {n.id: n.mac for n in inv.nics}
    assert macs["IO_Board_0_CX8_0/Port_0"] == "7c:c2:55:90:51:3a"
    assert macs["Riser_Slot2_BlueField_3_Card/BF3_0"] == "58:a2:e1:00:00:01"
    assert inv.pxe.problem is None and inv.pxe.nic is not None and inv.pxe.nic.id == "IO_Board_0_CX8_0/Port_0"
    assert {n.id: n.speed_mbps for n in inv.nics}["IO_Board_0_CX8_0/Port_0"] == 400_000
    check_inventory(inv, HostClass())
    chosen = _gb300(HostClass(pxe_nic="Riser_Slot2_BlueField_3_Card/BF3_0"), edits)
    assert chosen.pxe.nic is not None and chosen.pxe.nic.mac == "58:a2:e1:00:00:01"
    assert any("NetworkAdapters" in n for n in chosen.notes)
