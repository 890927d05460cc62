"""iDRAC9-shaped Redfish resources for one simulated server.

The shapes (property names, ids, nesting, the FQDD grammar) follow the Redfish responses of a real
Dell PowerEdge R650 with iDRAC9 5.10 (`../shared/realdata/2_redfish/dell_idrac9_r650/`); the values
come from `identity.py`. `static_tree` returns every resource that does not change while the BMC
runs; the ComputerSystem and Chassis, which carry power and boot state, are rendered per request by
`bmc.py` from `system_resource`/`chassis_resource`.
"""

from __future__ import annotations

from typing import Any

from sim.redfish.faults import Fault
from sim.redfish.identity import Hca, Nic, ServerIdentity

V1 = "/redfish/v1"
SYSTEM_ID = "System.Embedded.1"
CHASSIS_ID = "System.Embedded.1"
MANAGER_ID = "iDRAC.Embedded.1"
SYSTEM = f"{V1}/Systems/{SYSTEM_ID}"
CHASSIS = f"{V1}/Chassis/{CHASSIS_ID}"
MANAGER = f"{V1}/Managers/{MANAGER_ID}"
SESSIONS = f"{V1}/SessionService/Sessions"
SESSION_TIMEOUT_S = 1800
RESET = f"{SYSTEM}/Actions/ComputerSystem.Reset"
# Resources whose content changes with power, boot override or sessions (never served from a cache).
DYNAMIC = frozenset({SYSTEM, CHASSIS, SESSIONS})
EXPAND_MAX_LEVELS = 6
RESET_TYPES = ["On", "ForceOff", "ForceRestart", "GracefulRestart", "GracefulShutdown", "PushPowerButton", "Nmi",
               "PowerCycle"]
BOOT_TARGETS = ["None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget", "SDCard", "UefiHttp"]
Json = dict[str, Any]


def is_dynamic(path: str) -> bool:
    return path in DYNAMIC or path.startswith(SESSIONS + "/")


def allowed_methods(path: str) -> list[str]:
    """The methods a URI takes (its `Allow` header): what the simulator implements there."""
    if path == SYSTEM:
        return ["GET", "PATCH"]
    if path == SESSIONS:
        return ["GET", "POST"]
    if path.startswith(SESSIONS + "/"):
        return ["GET", "DELETE"]
    if path == RESET:
        return ["POST"]
    return ["GET"]


def ref(path: str) -> Json:
    return {"@odata.id": path}


def collection(path: str, kind: str, name: str, members: list[str]) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#{kind}Collection.{kind}Collection",
        "@odata.id": path,
        "@odata.type": f"#{kind}Collection.{kind}Collection",
        "Name": name,
        "Members": [ref(m) for m in members],
        "Members@odata.count": len(members),
    }


def service_root(uuid: str) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#ServiceRoot.ServiceRoot",
        "@odata.id": f"{V1}",
        "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
        "AccountService": ref(f"{V1}/AccountService"),
        "Chassis": ref(f"{V1}/Chassis"),
        "Description": "Root Service",
        "Id": "RootService",
        "Links": {"Sessions": ref(SESSIONS)},
        "Managers": ref(f"{V1}/Managers"),
        "Name": "Root Service",
        "Product": "Integrated Dell Remote Access Controller",
        "ProtocolFeaturesSupported": {
            "ExcerptQuery": False,
            "ExpandQuery": {"ExpandAll": True, "Levels": True, "Links": True, "MaxLevels": EXPAND_MAX_LEVELS,
                            "NoLinks": True},
            "FilterQuery": False,
            "OnlyMemberQuery": True,
            "SelectQuery": True,
        },
        "RedfishVersion": "1.17.0",
        "SessionService": ref(f"{V1}/SessionService"),
        "Systems": ref(f"{V1}/Systems"),
        "UUID": uuid,
        "Vendor": "Dell",
    }


def _nic_resource(ident: ServerIdentity, nic_fqdd: str, mac: str, speed: int, up: bool, desc: str) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#EthernetInterface.EthernetInterface",
        "@odata.id": f"{SYSTEM}/EthernetInterfaces/{nic_fqdd}",
        "@odata.type": "#EthernetInterface.v1_6_1.EthernetInterface",
        "AutoNeg": True,
        "Description": desc,
        "EthernetInterfaceType": "Physical",
        "FQDN": None,
        "FullDuplex": up,
        "HostName": None,
        "IPv4Addresses": [],
        "IPv4Addresses@odata.count": 0,
        "IPv6Addresses": [],
        "IPv6Addresses@odata.count": 0,
        "Id": nic_fqdd,
        "InterfaceEnabled": True,
        "LinkStatus": "LinkUp" if up else "LinkDown",
        "Links": {"Chassis": ref(CHASSIS)},
        "MACAddress": mac,
        "MTUSize": None,
        "Name": "System Ethernet Interface",
        "PermanentMACAddress": mac,
        "SpeedMbps": speed if up else 0,
        "Status": {"Health": "OK", "State": "Enabled"},
        "UefiDevicePath": f"PciRoot(0x2)/Pci(0x4,0x0)/Pci(0x0,0x0)/MAC({mac.replace(':', '')},0x1)",
        "VLAN": {},
    }


def static_tree(ident: ServerIdentity, faults: frozenset[Fault]) -> dict[str, Json]:
    """Every resource of this BMC except the ComputerSystem, the Chassis, the sessions and the
    AccountService (`accounts.py`), keyed by path."""
    out: dict[str, Json] = {}
    nics = [n for n in ident.nics if not (Fault.no_pxe_nic in faults and n.fqdd == ident.pxe_fqdd)]
    link = {n.fqdd: n.link_up and not (Fault.pxe_link_down in faults and n.fqdd == ident.pxe_fqdd) for n in nics}
    _add_service_collections(out)
    eth = f"{SYSTEM}/EthernetInterfaces"
    listed = [n for n in nics if not (Fault.pxe_nic_virtual in faults and n.fqdd == ident.pxe_fqdd)]
    out[eth] = collection(eth, "EthernetInterface", "System Ethernet Interface Collection",
                          [f"{eth}/{n.fqdd}" for n in listed])
    for n in listed:
        out[f"{eth}/{n.fqdd}"] = _nic_resource(ident, n.fqdd, n.mac, n.speed_mbps, link[n.fqdd], n.description)
    out[f"{SYSTEM}/Bios"] = _bios_resource(ident, pxe_enabled=Fault.no_pxe_nic not in faults)
    _add_processors(out, ident, faults)
    _add_network_adapters(out, ident, nics, link)
    out[MANAGER] = _manager_resource(ident)
    return out


def _add_service_collections(out: dict[str, Json]) -> None:
    out[f"{V1}/Systems"] = collection(f"{V1}/Systems", "ComputerSystem", "Computer System Collection", [SYSTEM])
    out[f"{V1}/Chassis"] = collection(f"{V1}/Chassis", "Chassis", "Chassis Collection", [CHASSIS])
    out[f"{V1}/Managers"] = collection(f"{V1}/Managers", "Manager", "Manager Collection", [MANAGER])
    out[f"{V1}/SessionService"] = {
        "@odata.id": f"{V1}/SessionService",
        "@odata.type": "#SessionService.v1_1_8.SessionService",
        "Id": "SessionService",
        "Name": "Session Service",
        "ServiceEnabled": True,
        "SessionTimeout": SESSION_TIMEOUT_S,
        "Sessions": ref(SESSIONS),
    }


def _bios_resource(ident: ServerIdentity, *, pxe_enabled: bool) -> Json:
    ordered = [ident.pxe_fqdd] + [n.fqdd for n in ident.nics if n.fqdd != ident.pxe_fqdd]
    attrs: Json = {"BootMode": "Uefi", "SysProfile": "PerfOptimized", "SystemServiceTag": ident.service_tag,
                   "SystemBiosVersion": ident.bios_version, "SystemModelName": ident.model}
    for i in range(4):
        attrs[f"PxeDev{i + 1}EnDis"] = "Enabled" if (i == 0 and pxe_enabled) else "Disabled"
        attrs[f"PxeDev{i + 1}Interface"] = ordered[i] if i < len(ordered) else ordered[-1]
        attrs[f"PxeDev{i + 1}Protocol"] = "IPv4"
    return {
        "@odata.context": f"{V1}/$metadata#Bios.Bios",
        "@odata.id": f"{SYSTEM}/Bios",
        "@odata.type": "#Bios.v1_2_1.Bios",
        "AttributeRegistry": "BiosAttributeRegistry.v1_0_3",
        "Attributes": attrs,
        "Description": "BIOS Configuration Current Settings",
        "Id": "Bios",
        "Name": "BIOS Configuration Current Settings",
    }


def _add_processors(out: dict[str, Json], ident: ServerIdentity, faults: frozenset[Fault]) -> None:
    procs = f"{SYSTEM}/Processors"
    gpus = max(0, ident.gpu_count - (1 if Fault.missing_gpu in faults else 0))
    proc_ids = ["CPU.Socket.1", "CPU.Socket.2"] + [f"Video.Slot.{20 + i}-1" for i in range(gpus)]
    out[procs] = collection(procs, "Processor", "Processors Collection", [f"{procs}/{p}" for p in proc_ids])
    for p in proc_ids:
        gpu = p.startswith("Video.")
        out[f"{procs}/{p}"] = {
            "@odata.id": f"{procs}/{p}",
            "@odata.type": "#Processor.v1_11_0.Processor",
            "Id": p,
            "Name": "Processor",
            "Manufacturer": "NVIDIA" if gpu else "Intel",
            "Model": ident.gpu_model if gpu else "Intel(R) Xeon(R) Platinum 8470",
            "ProcessorType": "GPU" if gpu else "CPU",
            "Status": {"Health": "OK", "State": "Enabled"},
        }


def _add_network_adapters(out: dict[str, Json], ident: ServerIdentity, nics: list[Nic],
                          link: dict[str, bool]) -> None:
    adapters_path = f"{CHASSIS}/NetworkAdapters"
    adapter_ids = sorted({n.adapter for n in nics}) + [h.adapter for h in ident.hcas]
    out[adapters_path] = collection(adapters_path, "NetworkAdapter", "Network Adapter Collection",
                                    [f"{adapters_path}/{a}" for a in adapter_ids])
    for aid in adapter_ids:
        base = f"{adapters_path}/{aid}"
        a_nics = [n for n in nics if n.adapter == aid]
        hcas = [h for h in ident.hcas if h.adapter == aid]
        funcs = [n.fqdd for n in a_nics] + [h.function for h in hcas]
        ports = sorted({n.port for n in a_nics}) + [h.function.rsplit("-", 1)[0] + "-1" for h in hcas]
        out[base] = _adapter_resource(base, aid, a_nics)
        out[f"{base}/NetworkDeviceFunctions"] = collection(
            f"{base}/NetworkDeviceFunctions", "NetworkDeviceFunction", "NetworkDeviceFunction Collection",
            [f"{base}/NetworkDeviceFunctions/{f}" for f in funcs])
        out[f"{base}/NetworkPorts"] = collection(
            f"{base}/NetworkPorts", "NetworkPort", "NetworkPort Collection",
            [f"{base}/NetworkPorts/{p}" for p in ports])
        for n in a_nics:
            out[f"{base}/NetworkDeviceFunctions/{n.fqdd}"] = _nic_function_resource(base, n)
        for n in a_nics:
            if f"{base}/NetworkPorts/{n.port}" not in out:
                out[f"{base}/NetworkPorts/{n.port}"] = _nic_port_resource(base, n, link[n.fqdd])
        for h in hcas:
            _add_hca(out, base, h)


def _adapter_resource(base: str, aid: str, a_nics: list[Nic]) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#NetworkAdapter.NetworkAdapter",
        "@odata.id": base,
        "@odata.type": "#NetworkAdapter.v1_4_0.NetworkAdapter",
        "Description": "Network Adapter View",
        "Id": aid,
        "Manufacturer": a_nics[0].manufacturer if a_nics else "Mellanox Technologies",
        "Model": a_nics[0].model if a_nics else "NVIDIA ConnectX-7 Single Port NDR OSFP PCIe Adapter",
        "Name": "Network Adapter View",
        "NetworkDeviceFunctions": ref(f"{base}/NetworkDeviceFunctions"),
        "NetworkPorts": ref(f"{base}/NetworkPorts"),
        "Status": {"Health": "OK", "HealthRollup": "OK", "State": "Enabled"},
    }


def _nic_function_resource(base: str, n: Nic) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#NetworkDeviceFunction.NetworkDeviceFunction",
        "@odata.id": f"{base}/NetworkDeviceFunctions/{n.fqdd}",
        "@odata.type": "#NetworkDeviceFunction.v1_5_1.NetworkDeviceFunction",
        "Description": "NetworkDeviceFunction",
        "Ethernet": {"MACAddress": n.mac, "MTUSize": None, "PermanentMACAddress": n.mac,
                     "VLAN": {"VLANEnable": False, "VLANId": 1}},
        "Id": n.fqdd,
        "Links": {"PhysicalPortAssignment": ref(f"{base}/NetworkPorts/{n.port}")},
        "Name": "NetworkDeviceFunction",
        "NetDevFuncCapabilities": ["Disabled", "Ethernet", "iSCSI"],
        "NetDevFuncType": "Ethernet",
        "Status": {"Health": "OK", "HealthRollup": "OK", "State": "Enabled"},
    }


def _nic_port_resource(base: str, n: Nic, up: bool) -> Json:
    return {
        "@odata.id": f"{base}/NetworkPorts/{n.port}",
        "@odata.type": "#NetworkPort.v1_2_1.NetworkPort",
        "Id": n.port,
        "LinkStatus": "Up" if up else "Down",
        "AssociatedNetworkAddresses": [n.mac],
        "CurrentLinkSpeedMbps": n.speed_mbps if up else 0,
        "Name": "NetworkPort",
        "PhysicalPortNumber": n.port.rsplit("-", 1)[-1],
    }


def _add_hca(out: dict[str, Json], base: str, h: Hca) -> None:
    """An InfiniBand HCA's device function (its GUIDs) and its one port, always up."""
    guid = ":".join(h.port_guid[i:i + 4] for i in range(0, 16, 4))
    port = h.function.rsplit("-", 1)[0] + "-1"
    out[f"{base}/NetworkDeviceFunctions/{h.function}"] = {
        "@odata.id": f"{base}/NetworkDeviceFunctions/{h.function}",
        "@odata.type": "#NetworkDeviceFunction.v1_5_1.NetworkDeviceFunction",
        "Id": h.function,
        "InfiniBand": {"MTUSize": 4096, "NodeGUID": guid, "PermanentNodeGUID": guid, "PortGUID": guid,
                       "PermanentPortGUID": guid},
        "Links": {"PhysicalPortAssignment": ref(f"{base}/NetworkPorts/{port}")},
        "Name": "NetworkDeviceFunction",
        "NetDevFuncCapabilities": ["InfiniBand"],
        "NetDevFuncType": "InfiniBand",
        "Status": {"Health": "OK", "HealthRollup": "OK", "State": "Enabled"},
    }
    out[f"{base}/NetworkPorts/{port}"] = {
        "@odata.id": f"{base}/NetworkPorts/{port}",
        "@odata.type": "#NetworkPort.v1_2_1.NetworkPort",
        "Id": port,
        "LinkStatus": "Up",
        "Name": "NetworkPort",
        "PhysicalPortNumber": "1",
    }


def _manager_resource(ident: ServerIdentity) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#Manager.Manager",
        "@odata.id": MANAGER,
        "@odata.type": "#Manager.v1_9_0.Manager",
        "Description": "BMC",
        "FirmwareVersion": ident.bmc_firmware,
        "Id": MANAGER_ID,
        "Links": {"ManagerForServers": [ref(SYSTEM)], "ManagerForChassis": [ref(CHASSIS)]},
        "ManagerType": "BMC",
        "Model": "16G Monolithic",
        "Name": "Manager",
        "Status": {"Health": "OK", "State": "Enabled"},
        "UUID": ident.uuid,
    }


def system_resource(ident: ServerIdentity, power: str, boot: Json, health: str) -> Json:
    return {
        "@odata.context": f"{V1}/$metadata#ComputerSystem.ComputerSystem",
        "@odata.id": SYSTEM,
        "@odata.type": "#ComputerSystem.v1_12_0.ComputerSystem",
        "Actions": {"#ComputerSystem.Reset": {"ResetType@Redfish.AllowableValues": RESET_TYPES,
                                              "target": RESET}},
        "AssetTag": "",
        "Bios": ref(f"{SYSTEM}/Bios"),
        "BiosVersion": ident.bios_version,
        "Boot": {
            "BootOrder": ["Boot0000", "Boot0001"],
            "BootOrder@odata.count": 2,
            "BootSourceOverrideEnabled": boot["BootSourceOverrideEnabled"],
            "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Once", "Continuous", "Disabled"],
            "BootSourceOverrideMode": boot["BootSourceOverrideMode"],
            "BootSourceOverrideMode@Redfish.AllowableValues": ["UEFI", "Legacy"],
            "BootSourceOverrideTarget": boot["BootSourceOverrideTarget"],
            "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS,
            "UefiTargetBootSourceOverride": None,
        },
        "Description": "Computer System which represents a machine (physical or virtual) and the local resources "
        "such as memory, cpu and other devices that can be accessed from that machine.",
        "EthernetInterfaces": ref(f"{SYSTEM}/EthernetInterfaces"),
        "HostName": "",
        "Id": SYSTEM_ID,
        "IndicatorLED": "Off",
        "Links": {"Chassis": [ref(CHASSIS)], "Chassis@odata.count": 1, "ManagedBy": [ref(MANAGER)],
                  "ManagedBy@odata.count": 1},
        "Manufacturer": "Dell Inc.",
        "MemorySummary": {"Status": {"Health": "OK", "HealthRollup": "OK", "State": "Enabled"},
                          "TotalSystemMemoryGiB": 2048},
        "Model": ident.model,
        "Name": "System",
        "PowerState": power,
        "ProcessorSummary": {"Count": 2, "Model": "Intel(R) Xeon(R) Platinum 8470",
                             "Status": {"Health": "OK", "HealthRollup": "OK", "State": "Enabled"}},
        "Processors": ref(f"{SYSTEM}/Processors"),
        "SKU": ident.service_tag,
        "SerialNumber": ident.serial,
        "Status": {"Health": health, "HealthRollup": health, "State": "Enabled"},
        "SystemType": "Physical",
        "UUID": ident.uuid,
    }


def chassis_resource(ident: ServerIdentity, power: str, health: str) -> Json:
    return {
        "@odata.id": CHASSIS,
        "@odata.type": "#Chassis.v1_14_0.Chassis",
        "ChassisType": "RackMount",
        "Id": CHASSIS_ID,
        "Links": {"ComputerSystems": [ref(SYSTEM)], "ManagedBy": [ref(MANAGER)]},
        "Manufacturer": "Dell Inc.",
        "Model": ident.model,
        "Name": "Computer System Chassis",
        "NetworkAdapters": ref(f"{CHASSIS}/NetworkAdapters"),
        "PowerState": power,
        "SKU": ident.service_tag,
        "SerialNumber": ident.serial,
        "Status": {"Health": health, "HealthRollup": health, "State": "Enabled"},
    }
