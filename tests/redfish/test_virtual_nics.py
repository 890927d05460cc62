"""MACs that exist only as a chassis adapter's NetworkDeviceFunctions (issue #38): the virtual NICs of a Cisco
VIC and its kind, which the OS boots and asks DHCP from but the system's EthernetInterfaces do not list.

The simulator serves the case (`pxe_nic_virtual`: the iDRAC lists the PXE NIC only as its adapter's function);
the Cisco-shaped payloads below are written for these tests after the shape of a UCS C240 M5's CIMC answers
(`Chassis/1/NetworkAdapters/<VIC>/NetworkDeviceFunctions/{eth0,eth1,fc0}`, the FCoE function with an Ethernet
MAC of its own), with made-up, locally administered MACs: no Cisco capture under a licence we can use exists in
../shared/realdata.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from provision.bmc.chassis_nics import MAX_ADAPTERS, MAX_PER_ADAPTER
from provision.bmc.harvest import HostInventory, check_inventory, harvest
from provision.redfish import ClientOptions, RedfishClient
from provision.site import load_site
from provision.site.credentials import Login, Secret
from provision.site.model import HostClass
from provision.state.facts import facts_from_inventory
from sim.redfish.bmc import Settings, SimBmc
from sim.redfish.faults import Fault
from sim.redfish.http import Request, Response
from sim.redfish.identity import identity
from tests.redfish.simlab import write_site

PASSWORD = "pw-virtual-nics"


def _bridge(bmc: SimBmc) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        answer = await bmc.handle(Request(request.method, request.url.raw_path.decode(), dict(request.headers),
                                          await request.aread()))
        assert isinstance(answer, Response)
        return httpx.Response(answer.status, headers=answer.headers, content=answer.body)

    return httpx.MockTransport(handler)


def _harvest(transport: httpx.MockTransport, host_class: HostClass) -> HostInventory:
    async def go() -> HostInventory:
        async with RedfishClient("https://bmc.test", Login("root", Secret(PASSWORD)),
                                 options=ClientOptions(auth="basic"), transport=transport) as bmc:
            return await harvest(bmc, host_class)

    return asyncio.run(go())


def test_a_pxe_nic_listed_only_as_a_device_function_is_harvested_and_chosen(tmp_path: Path) -> None:
    # Before: no_pxe_nic ("BIOS PxeDev1 boots from NIC.Integrated.1-1-1, which the BMC does not list"), and the
    # NIC's MAC was in no DHCP reservation.
    site = load_site(write_site(tmp_path, 1, 8443))
    host = site.hosts()[0]
    ident = identity(site, host)
    pxe_mac = next(n.mac for n in ident.nics if n.fqdd == ident.pxe_fqdd).lower()
    bmc = SimBmc(ident, "root", PASSWORD, Settings(power_delay_s=0.0), frozenset({Fault.pxe_nic_virtual}))
    inv = _harvest(_bridge(bmc), site.host_class(host))
    assert inv.pxe.problem is None and inv.pxe.source == "bios:PxeDev1"
    assert inv.pxe.nic is not None and inv.pxe.nic.mac == pxe_mac
    assert inv.pxe.nic.id == "NIC.Integrated.1/NIC.Integrated.1-1-1"
    summary = inv.summary()
    assert summary["pxe_mac"] == pxe_mac
    assert summary["mac_sources"]["NIC.Integrated.1/NIC.Integrated.1-1-1"] == "NetworkDeviceFunction"
    assert {s for nic, s in summary["mac_sources"].items() if nic != inv.pxe.nic.id} == {"EthernetInterface"}
    assert sorted(m for m in summary["macs"].values() if m) == sorted(n.mac.lower() for n in ident.nics)
    facts = facts_from_inventory(summary)
    assert facts["pxe_mac"] == pxe_mac and pxe_mac in facts["macs"].values()
    assert any("only in the chassis' NetworkDeviceFunctions" in n for n in inv.notes)
    check_inventory(inv, site.host_class(host))
    # the InfiniBand functions stay functions: counted, never NICs
    assert inv.ib_functions == 2 and all("InfiniBand" not in n.id for n in inv.nics)


def test_without_the_fault_the_simulated_nics_are_all_ethernet_interfaces(tmp_path: Path) -> None:
    site = load_site(write_site(tmp_path, 1, 8443))
    host = site.hosts()[0]
    inv = _harvest(_bridge(SimBmc(identity(site, host), "root", PASSWORD, Settings(power_delay_s=0.0))),
                   site.host_class(host))
    assert set(inv.summary()["mac_sources"].values()) == {"EthernetInterface"}
    assert inv.pxe.nic is not None and inv.pxe.nic.id == "NIC.Integrated.1-1-1"
    assert inv.cross_check == {"checked": True, "mismatches": [], "not_in_chassis": []}


# ------------------------------------------------------------------ Cisco-shaped service

V1 = "/redfish/v1"
SYSTEM = f"{V1}/Systems/WZPTEST0001"
ADAPTERS = f"{V1}/Chassis/1/NetworkAdapters"


def _function(adapter: str, fid: str, kind: str, mac: str) -> dict[str, Any]:
    return {"@odata.id": f"{ADAPTERS}/{adapter}/NetworkDeviceFunctions/{fid}", "Id": fid, "Name": fid,
            "NetDevFuncType": kind, "BootMode": "Disabled", "Ethernet": {"MACAddress": mac, "MTUSize": 1500},
            "Status": {"Health": "OK", "State": "Enabled"}}


def _cisco(vics: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    tree: dict[str, dict[str, Any]] = {
        V1: {"@odata.id": V1, "Vendor": "Cisco", "Systems": {"@odata.id": f"{V1}/Systems"},
             "Chassis": {"@odata.id": f"{V1}/Chassis"}},
        f"{V1}/Systems": {"Members": [{"@odata.id": SYSTEM}]},
        SYSTEM: {"@odata.id": SYSTEM, "Id": "WZPTEST0001", "Manufacturer": "Cisco Systems Inc",
                 "Model": "UCSC-C240-M5SN", "SerialNumber": "WZPTEST0001", "PowerState": "On",
                 "EthernetInterfaces": {"@odata.id": f"{SYSTEM}/EthernetInterfaces"},
                 "Links": {"Chassis": [{"@odata.id": f"{V1}/Chassis/1"}]}},
        f"{SYSTEM}/EthernetInterfaces": {"Members": [{"@odata.id": f"{SYSTEM}/EthernetInterfaces/{i}"}
                                                     for i in ("3.1", "3.2")]},
        f"{V1}/Chassis/1": {"@odata.id": f"{V1}/Chassis/1", "Id": "1",
                            "NetworkAdapters": {"@odata.id": ADAPTERS}},
        ADAPTERS: {"Members": [{"@odata.id": f"{ADAPTERS}/{a}"} for a in vics]},
    }
    for i, mac in (("3.1", "02:3c:fd:00:00:4c"), ("3.2", "02:3c:fd:00:00:4d")):  # no LinkStatus, as CIMC
        tree[f"{SYSTEM}/EthernetInterfaces/{i}"] = {"@odata.id": f"{SYSTEM}/EthernetInterfaces/{i}", "Id": i,
                                                    "MACAddress": mac, "PermanentMACAddress": mac}
    for adapter, functions in vics.items():
        base = f"{ADAPTERS}/{adapter}"
        tree[base] = {"@odata.id": base, "Id": adapter, "Model": "UCSC-MLOM-C25Q-04",
                      "NetworkDeviceFunctions": {"@odata.id": f"{base}/NetworkDeviceFunctions"}}
        tree[f"{base}/NetworkDeviceFunctions"] = {"Members": [{"@odata.id": f["@odata.id"]} for f in functions]}
        tree.update({f["@odata.id"]: f for f in functions})
    return tree


def _serve(tree: dict[str, dict[str, Any]], seen: list[str] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if seen is not None:
            seen.append(path)
        if path in tree:
            return httpx.Response(200, json=tree[path])
        return httpx.Response(404, json={"error": {"@Message.ExtendedInfo": [{"Message": "not found"}]}})

    return httpx.MockTransport(handler)


VIC = "UCSC-MLOM-C25Q-04_FCHTEST0001"
VIC_FUNCTIONS = [_function(VIC, "eth0", "Ethernet", "02:57:31:00:14:0A"),
                 _function(VIC, "eth1", "Ethernet", "02:57:31:00:14:0B"),
                 _function(VIC, "fc0", "FibreChannelOverEthernet", "02:57:31:00:14:0C")]


def test_vic_vnics_are_harvested_with_their_source_and_fcoe_is_not() -> None:
    inv = _harvest(_serve(_cisco({VIC: VIC_FUNCTIONS})), HostClass(pxe_nic="eth0"))
    summary = inv.summary()
    assert summary["macs"] == {"3.1": "02:3c:fd:00:00:4c", "3.2": "02:3c:fd:00:00:4d",
                               f"{VIC}/eth0": "02:57:31:00:14:0a", f"{VIC}/eth1": "02:57:31:00:14:0b"}
    assert summary["mac_sources"] == {"3.1": "EthernetInterface", "3.2": "EthernetInterface",
                                      f"{VIC}/eth0": "NetworkDeviceFunction", f"{VIC}/eth1": "NetworkDeviceFunction"}
    assert (summary["pxe_nic"], summary["pxe_mac"], summary["pxe_source"]) == (
        f"{VIC}/eth0", "02:57:31:00:14:0a", "site:eth0")
    assert inv.pxe.problem is None
    check_inventory(inv, HostClass(pxe_nic="eth0"))
    # the same NIC named in full
    assert _harvest(_serve(_cisco({VIC: VIC_FUNCTIONS})), HostClass(pxe_nic=f"{VIC}/eth1")).pxe.nic is not None
    # the vNICs are no EthernetInterfaces the cross-check could miss
    assert sorted(inv.cross_check["not_in_chassis"]) == ["3.1", "3.2"]


def test_a_function_id_two_adapters_share_must_be_named_with_its_adapter() -> None:
    other = "UCSC-PCIE-C25Q-04_FCHTEST0002"
    tree = _cisco({VIC: VIC_FUNCTIONS, other: [_function(other, "eth0", "Ethernet", "02:57:31:00:20:0A")]})
    inv = _harvest(_serve(tree), HostClass(pxe_nic="eth0"))
    assert inv.pxe.problem == "no_pxe_nic"
    assert f"{VIC}/eth0" in inv.pxe.detail and f"{other}/eth0" in inv.pxe.detail
    assert "<adapter>/<function>" in inv.pxe.detail
    named = _harvest(_serve(tree), HostClass(pxe_nic=f"{other}/eth0"))
    assert named.pxe.nic is not None and named.pxe.nic.mac == "02:57:31:00:20:0a"


def test_function_reads_are_bounded_and_one_unserved_function_is_a_note() -> None:
    many = [_function(VIC, f"eth{i}", "Ethernet", f"02:57:31:00:15:{i:02X}") for i in range(MAX_PER_ADAPTER + 8)]
    tree = _cisco({VIC: many})
    del tree[many[1]["@odata.id"]]  # listed, but the BMC answers 404
    adapters = {f"VIC{i:02d}": [_function(f"VIC{i:02d}", "eth0", "Ethernet", f"02:57:32:00:00:{i:02X}")]
                for i in range(MAX_ADAPTERS + 5)}
    seen: list[str] = []
    inv = _harvest(_serve({**tree, **{k: v for k, v in _cisco(adapters).items() if "VIC" in k},
                           ADAPTERS: {"Members": [{"@odata.id": f"{ADAPTERS}/{a}"} for a in [VIC, *adapters]]}},
                          seen), HostClass(pxe_nic=f"{VIC}/eth0"))
    function_gets = [p for p in seen if "/NetworkDeviceFunctions/" in p]
    adapter_gets = {p for p in seen if p.startswith(f"{ADAPTERS}/") and p.count("/") == 6}
    assert len(adapter_gets) == MAX_ADAPTERS  # the VIC and the first 31 of the others
    assert len([p for p in function_gets if f"/{VIC}/" in p]) == MAX_PER_ADAPTER
    vnics = [n for n in inv.nics if n.id.startswith(f"{VIC}/")]
    assert len(vnics) == MAX_PER_ADAPTER - 1 and f"{VIC}/eth1" not in {n.id for n in vnics}
    assert any(many[1]["@odata.id"] in n for n in inv.notes)
    assert any(n.startswith(f"{ADAPTERS}: read the first {MAX_ADAPTERS} members") for n in inv.notes)
    assert any(n.startswith(f"{ADAPTERS}/{VIC}/NetworkDeviceFunctions: read the first {MAX_PER_ADAPTER}")
               for n in inv.notes)
    assert inv.pxe.problem is None


@pytest.mark.parametrize("kind", ["InfiniBand", "FibreChannel", "FibreChannelOverEthernet", "Disabled"])
def test_functions_of_other_kinds_are_no_nics(kind: str) -> None:
    tree = _cisco({VIC: [_function(VIC, "x0", kind, "02:57:31:00:16:01")]})
    inv = _harvest(_serve(tree), HostClass())
    assert set(inv.summary()["macs"]) == {"3.1", "3.2"}


def test_without_ethernet_interfaces_the_chassis_read_skips_fcoe_functions_too() -> None:
    tree = _cisco({VIC: VIC_FUNCTIONS})
    tree[SYSTEM] = {k: v for k, v in tree[SYSTEM].items() if k != "EthernetInterfaces"}
    tree[f"{V1}/Chassis"] = {"Members": [{"@odata.id": f"{V1}/Chassis/1"}]}
    inv = _harvest(_serve(tree), HostClass(pxe_nic="eth0"))
    assert inv.summary()["macs"] == {f"{VIC}/eth0": "02:57:31:00:14:0a", f"{VIC}/eth1": "02:57:31:00:14:0b"}
    assert inv.pxe.nic is not None and inv.pxe.nic.id == f"{VIC}/eth0"
    assert inv.raw["chassis_nics"]["looked"][-1].endswith("3 NetworkDeviceFunction(s) (1 not Ethernet), "
                                                           "2 MAC address(es)")


# ------------------------------------------------------------------ real payload: HPE iLO (MIT, see SOURCES.md)

HPE = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "2_redfish" / "hpe_ilo_emulator"


def _hpe(drop_interface: str | None = None) -> httpx.MockTransport:
    """The iLO captures served by path (`/redfish/v1/A/B` → `_redfish_v1_A_B.json`); the root, the Systems
    collection and Chassis/1, which the capture lacks, are glue."""
    if not HPE.is_dir():
        pytest.skip(f"{HPE} absent (../shared/realdata is not checked out here)")
    glue: dict[str, Any] = {
        V1: {"@odata.id": V1, "Vendor": "HPE", "Systems": {"@odata.id": f"{V1}/Systems"}},
        f"{V1}/Systems": {"Members": [{"@odata.id": f"{V1}/Systems/1"}]},
        f"{V1}/Chassis/1": {"@odata.id": f"{V1}/Chassis/1", "Id": "1",
                            "NetworkAdapters": {"@odata.id": f"{V1}/Chassis/1/NetworkAdapters"}},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        file = HPE / (path.replace("/", "_") + ".json")
        body = glue.get(path) or (json.loads(file.read_text()) if file.is_file() else None)
        if body is None:
            return httpx.Response(404, json={"error": {"@Message.ExtendedInfo": [{"Message": "not captured"}]}})
        if drop_interface and path == f"{V1}/Systems/1/EthernetInterfaces":
            body = {**body, "Members": [m for m in body["Members"] if not m["@odata.id"].endswith(drop_interface)]}
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handler)


@pytest.mark.realdata
def test_real_ilo_functions_that_repeat_the_ethernet_interfaces_add_no_nic() -> None:
    inv = _harvest(_hpe(), HostClass())
    assert inv.summary()["macs"] == {"77": "58:a2:e1:03:96:f2", "78": "58:a2:e1:03:96:f3"}
    assert set(inv.summary()["mac_sources"].values()) == {"EthernetInterface"}
    assert inv.functions is not None and {f.id for f in inv.functions} == {"0", "1"}


@pytest.mark.realdata
def test_real_ilo_function_whose_interface_is_not_listed_is_harvested_from_the_adapter() -> None:
    # Before: 58:a2:e1:03:96:f3 was in no harvested MAC (no DHCP reservation) once 78 is not listed.
    inv = _harvest(_hpe(drop_interface="/78"), HostClass())
    assert inv.summary()["macs"] == {"77": "58:a2:e1:03:96:f2", "DE081000/1": "58:a2:e1:03:96:f3"}
    assert inv.summary()["mac_sources"]["DE081000/1"] == "NetworkDeviceFunction"
    nic = next(n for n in inv.nics if n.id == "DE081000/1")
    assert nic.permanent_mac == "58:a2:e1:03:96:f3" and nic.function_id == "1"
