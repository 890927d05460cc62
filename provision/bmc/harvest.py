"""Harvest one host: system facts, NICs (with the chassis tree as cross-check), the PXE NIC, GPUs.

The NICs are the system's EthernetInterfaces plus the Ethernet NetworkDeviceFunctions of its chassis'
adapters that are none of them (a Cisco VIC's virtual NICs exist only there); each NIC says which of the two
its MAC came from. Adapters and functions are read up to the bounds `chassis_nics` keeps.

Discovery follows `@odata.id` links from the service root. On a Dell service root the ComputerSystem
is first asked for at its well-known iDRAC path, and the network adapters at the iDRAC's path under the
system's chassis (a round trip saved each); a 404 at either falls back to following links. Collections
are read with `$expand` when the service root advertises it (one request instead of one per member).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from provision.aio import gather_or_cancel, task_group
from provision.bmc.chassis_nics import MAX_ADAPTERS, MAX_PER_ADAPTER, ChassisNics, chassis_nics
from provision.bmc.inventory import (
    ETHERNET_INTERFACE,
    NetworkFunction,
    Nic,
    PxeChoice,
    PxeDevice,
    SystemInfo,
    choose_pxe_nic,
    count_gpus,
    is_ethernet_function,
    nic_from_function,
    parse_bios_pxe,
    parse_ethernet_interface,
    parse_network_device_function,
    parse_system,
)
from provision.bmc.triage import HostProblem
from provision.redfish import (
    NOT_SERVED,
    RedfishClient,
    RedfishNotFound,
    RedfishProtocolError,
    Resource,
    first_link,
    odata_id,
)
from provision.redfish.resource import is_expanded
from provision.site.model import HostClass

IDRAC_SYSTEM = "/redfish/v1/Systems/System.Embedded.1"
IDRAC_CHASSIS_PREFIX = "/redfish/v1/Chassis/System.Embedded."
_LOOKED_SHOWN = 12  # places named in a "no MAC anywhere" detail; the evidence keeps them all
T = TypeVar("T")
Function = tuple[str, Resource]  # a NetworkDeviceFunction and the Id of the adapter it belongs to
# What the NIC parser reads, as the BMC sent it: the evidence behind each harvested MAC and link state.
_NIC_EVIDENCE = ("@odata.id", "Id", "Description", "MACAddress", "PermanentMACAddress", "LinkStatus", "SpeedMbps",
                 "InterfaceEnabled", "Status")


def is_idrac(root: Resource) -> bool:
    oem = root.data.get("Oem")
    return root.data.get("Vendor") == "Dell" or (isinstance(oem, Mapping) and "Dell" in oem)


async def find_system(client: RedfishClient) -> Resource:
    root = await client.root()
    if is_idrac(root):
        try:
            return await client.get(IDRAC_SYSTEM)
        except RedfishNotFound:
            pass
    systems = await client.get(root.require_link("Systems"))
    members = systems.data.get("Members")
    first = odata_id(members[0]) if isinstance(members, list) and members else None
    if first is None:
        raise RedfishProtocolError("the Systems collection is empty", endpoint=client.endpoint, path=systems.path)
    return await client.get(first)


async def _optional(work: Awaitable[T], notes: list[str], what: str) -> T | None:
    """Parts of the inventory some BMCs do not have: missing is a note, not a failure."""
    try:
        return await work
    except NOT_SERVED as exc:
        notes.append(f"{what}: {exc.detail}")
        return None


@dataclass(frozen=True)
class HostInventory:
    system: SystemInfo
    nics: tuple[Nic, ...]
    functions: tuple[NetworkFunction, ...] | None
    pxe_devices: tuple[PxeDevice, ...]
    pxe: PxeChoice
    bmc_firmware: str | None
    gpus: int | None
    ib_functions: int | None
    cross_check: dict[str, Any]
    notes: tuple[str, ...]
    raw: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        return {
            "system_id": self.system.id,
            "serial": self.system.serial,
            "service_tag": self.system.service_tag,
            "manufacturer": self.system.manufacturer,
            "model": self.system.model,
            "bios_version": self.system.bios_version,
            "bmc_firmware": self.bmc_firmware,
            "power_state": self.system.power_state,
            "health": self.system.health_rollup or self.system.health,
            "pxe_nic": self.pxe.nic.id if self.pxe.nic else None,
            "pxe_mac": self.pxe.nic.mac if self.pxe.nic else None,
            "pxe_source": self.pxe.source,
            "macs": {n.id: n.mac for n in self.nics},
            "mac_sources": {n.id: n.source for n in self.nics},
            "links": {n.id: n.link for n in self.nics},
            "gpus": self.gpus,
            "ib_functions": self.ib_functions,
        }


async def _bounded(client: RedfishClient, listing: Resource, limit: int, notes: list[str]) -> list[Resource]:
    """The first `limit` members of a collection, inline when the BMC expanded them, else each read on its own
    (one it does not serve is a note); members past the limit, or on further pages, are a note, never read."""
    raw = listing.data.get("Members")
    if not isinstance(raw, list):
        raise RedfishProtocolError(f"{listing.path} is not a collection (no Members list)", endpoint=client.endpoint,
                                   path=listing.path)
    if len(raw) > limit or listing.data.get("Members@odata.nextLink"):
        notes.append(f"{listing.path}: read the first {min(len(raw), limit)} members, not the rest")
    inline = [Resource(odata_id(m) or listing.path, m) if is_expanded(m) else None for m in raw[:limit]]
    if all(r is not None for r in inline):
        return [r for r in inline if r is not None]  # nothing to fetch, so no tasks to spread it over

    async def one(member: Any, got: Resource | None) -> Resource | None:
        if got is not None:
            return got
        try:
            return await client.resolve(member, listing.path)
        except NOT_SERVED as exc:
            notes.append(f"{odata_id(member) or listing.path}: {exc.detail}")
            return None

    found = await gather_or_cancel(*(one(m, r) for m, r in zip(raw[:limit], inline, strict=True)))
    return [r for r in found if r is not None]


async def _adapters(client: RedfishClient, chassis_path: str, notes: list[str]) -> list[Resource] | None:
    """The chassis' NetworkAdapters with their functions (expanded three levels deep when offered), at most
    MAX_ADAPTERS of them."""
    if is_idrac(await client.root()) and chassis_path.startswith(IDRAC_CHASSIS_PREFIX):
        try:
            listing = await client.get_expanded(f"{chassis_path}/NetworkAdapters", 3)
        except RedfishNotFound:
            pass  # not where iDRACs keep them: ask the chassis
        else:
            return await _bounded(client, listing, MAX_ADAPTERS, notes)
    chassis = await client.get(chassis_path)
    adapters_path = chassis.link("NetworkAdapters")
    if adapters_path is None:
        return None
    return await _bounded(client, await client.get_expanded(adapters_path, 3), MAX_ADAPTERS, notes)


async def _adapter_functions(client: RedfishClient, adapter: Resource, notes: list[str]) -> list[Function]:
    """An adapter's NetworkDeviceFunctions (at most MAX_PER_ADAPTER); an adapter whose collection the BMC does
    not serve is a note, and the other adapters still count."""
    name = str(adapter.data.get("Id") or adapter.path.rsplit("/", 1)[-1])
    value = adapter.data.get("NetworkDeviceFunctions")
    try:
        if isinstance(value, Mapping) and isinstance(value.get("Members"), list):
            listing = Resource(odata_id(value) or adapter.path, value)  # expanded inline
        else:
            listing = await client.resolve(value, f"{adapter.path} NetworkDeviceFunctions")
        return [(name, f) for f in await _bounded(client, listing, MAX_PER_ADAPTER, notes)]
    except NOT_SERVED as exc:
        notes.append(f"{adapter.path} NetworkDeviceFunctions: {exc.detail}")
        return []


async def _network_functions(client: RedfishClient, system: Resource, notes: list[str]) -> list[Function] | None:
    chassis_path = first_link(system.data, "Links", "Chassis")
    if chassis_path is None:
        return None
    found = await _adapters(client, chassis_path, notes)
    if found is None:
        return None
    adapters = [a for a in found if a.data.get("NetworkDeviceFunctions") is not None]
    if all(isinstance(f := a.data["NetworkDeviceFunctions"], Mapping) and "Members" in f for a in adapters):
        # expanded inline: nothing to fetch, so no tasks to spread it over
        per_adapter = [await _adapter_functions(client, a, notes) for a in adapters]
    else:
        per_adapter = await gather_or_cancel(*(_adapter_functions(client, a, notes) for a in adapters))
    return [f for funcs in per_adapter for f in funcs]


def _function_nics(nics: tuple[Nic, ...], funcs: list[Function]) -> tuple[Nic, ...]:
    """The Ethernet NetworkDeviceFunctions that are no EthernetInterface of the system, as NICs: the virtual
    NICs of a Cisco VIC (and their kind), whose MACs the OS boots and asks DHCP from but which the system's
    EthernetInterfaces do not list. A function with an interface's Id or MAC is that interface (the cross
    check compares them); an FCoE or InfiniBand function is no NIC to boot from."""
    ids = {n.id for n in nics}
    seen = {n.mac for n in nics if n.mac}
    out = []
    for adapter, r in funcs:
        fn = parse_network_device_function(r.data)
        if not is_ethernet_function(fn) or fn.id in ids or fn.mac in seen:
            continue
        nic = nic_from_function(adapter, r.data)
        if nic.id in ids:
            continue
        ids.add(nic.id)
        seen.add(nic.mac or "")
        out.append(nic)
    return tuple(out)


def _cross_check(nics: tuple[Nic, ...], functions: tuple[NetworkFunction, ...] | None) -> dict[str, Any]:
    """The system's EthernetInterfaces against the chassis' NetworkDeviceFunctions of the same Id."""
    if functions is None:
        return {"checked": False}
    nics = tuple(n for n in nics if n.source == ETHERNET_INTERFACE)
    by_id = {f.id: f for f in functions}
    mismatches = [
        {"nic": n.id, "ethernet_interface": n.mac, "network_device_function": by_id[n.id].mac}
        for n in nics
        if n.id in by_id and by_id[n.id].mac and n.mac and by_id[n.id].mac != n.mac
    ]
    missing = sorted(n.id for n in nics if n.id not in by_id)
    return {"checked": True, "mismatches": mismatches, "not_in_chassis": missing}


@dataclass(frozen=True)
class _Read:
    eth: list[Resource]
    chassis: ChassisNics | None  # read when the system has no EthernetInterfaces
    bios: Resource | None
    manager: Resource | None
    procs: list[Resource] | None
    funcs: list[Function] | None


async def _read(client: RedfishClient, system: Resource, host_class: HostClass, notes: list[str]) -> _Read:
    eth_path = system.link("EthernetInterfaces")
    bios_path = system.link("Bios")
    manager_path = first_link(system.data, "Links", "ManagedBy")
    proc_path = system.link("Processors")

    async def nothing() -> None:
        return None

    async def no_members() -> list[Resource]:
        return []

    async with task_group() as group:
        eth_task = group.create_task(client.members(eth_path) if eth_path else no_members())
        chassis_task = group.create_task(chassis_nics(client, system) if eth_path is None else nothing())
        bios_task = group.create_task(_optional(client.get(bios_path), notes, "BIOS") if bios_path else nothing())
        manager_task = group.create_task(
            _optional(client.get(manager_path), notes, "manager") if manager_path else nothing())
        procs_task = group.create_task(_optional(client.members(proc_path), notes, "processors")
                                       if proc_path and host_class.gpu else nothing())
        funcs_task = group.create_task(_optional(_network_functions(client, system, notes), notes, "network adapters")
                                       if eth_path else nothing())
    return _Read(eth_task.result(), chassis_task.result(), bios_task.result(), manager_task.result(),
                 procs_task.result(), funcs_task.result())


def _raw(system: Resource, got: _Read, attributes: Any) -> dict[str, Any]:
    """What the inventory was read from, as the BMC sent it (the evidence behind each fact)."""
    manager, procs, funcs = got.manager, got.procs, got.funcs
    return {
        "system": {k: v for k, v in system.data.items() if k in (
            "@odata.id", "Id", "Manufacturer", "Model", "SerialNumber", "SKU", "BiosVersion", "PowerState",
            "Status", "UUID", "Boot")},
        "ethernet_interfaces": [{k: r.data[k] for k in _NIC_EVIDENCE if k in r.data} for r in got.eth],
        **({"chassis_nics": {"looked": got.chassis.looked, "resources": got.chassis.raw}} if got.chassis else {}),
        "bios_pxe": {k: v for k, v in (attributes or {}).items() if k.startswith("PxeDev") or k == "BootMode"},
        "manager": {k: manager.data.get(k) for k in ("@odata.id", "FirmwareVersion", "Model")} if manager else None,
        "network_device_functions": [
            {k: r.data.get(k) for k in ("@odata.id", "Id", "NetDevFuncType", "BootMode", "Ethernet")} for _, r in funcs
        ] if funcs is not None else None,
        "gpus": [{k: p.data.get(k) for k in ("Id", "Model", "ProcessorType")} for p in procs
                 if str(p.data.get("ProcessorType", "")).upper() == "GPU"] if procs is not None else None,
    }


def _no_mac_anywhere(system: Resource, found: ChassisNics) -> PxeChoice:
    listed = f"{len(found.nics)} port(s)/function(s) without one" if found.nics else "no ports or functions"
    shown = "; ".join(found.looked[:_LOOKED_SHOWN])
    more = len(found.looked) - _LOOKED_SHOWN
    if more > 0:
        shown += f"; and {more} more places (evidence: raw.chassis_nics)"
    return PxeChoice(None, "chassis:NetworkAdapters", "no_pxe_nic",
                     f"the BMC reports no MAC address anywhere ({listed}): {system.path} has no EthernetInterfaces; "
                     f"looked at {shown}")


async def harvest(client: RedfishClient, host_class: HostClass, system: Resource | None = None) -> HostInventory:
    """Read one host's inventory; raises RedfishError on BMC failures (the caller triages)."""
    system = system or await find_system(client)
    notes: list[str] = []
    got = await _read(client, system, host_class, notes)
    if got.chassis is not None and not got.chassis.looked:
        raise RedfishProtocolError("the ComputerSystem has no EthernetInterfaces link, and the service lists no "
                                   "Chassis to read NetworkAdapters from", endpoint=client.endpoint, path=system.path)
    if got.chassis is not None:
        nics = tuple(got.chassis.nics)
        notes.append(f"NICs read from the chassis' NetworkAdapters: {system.path} has no EthernetInterfaces")
    else:
        interfaces = tuple(parse_ethernet_interface(r.data) for r in got.eth)
        virtual = _function_nics(interfaces, got.funcs or [])
        nics = interfaces + virtual
        if virtual:
            notes.append(f"{len(virtual)} MAC address(es) only in the chassis' NetworkDeviceFunctions, not in "
                         f"{system.path}/EthernetInterfaces: {', '.join(n.id for n in virtual)}")
    functions = tuple(parse_network_device_function(r.data) for _, r in got.funcs) if got.funcs is not None else None
    attributes = got.bios.data.get("Attributes") if got.bios is not None else None
    pxe_devices = parse_bios_pxe(attributes) if isinstance(attributes, Mapping) else ()
    if got.chassis is not None and not any(n.mac for n in nics):
        pxe = _no_mac_anywhere(system, got.chassis)
    else:
        pxe = choose_pxe_nic(nics, pxe_devices, host_class.pxe_nic)
    fw = got.manager.data.get("FirmwareVersion") if got.manager is not None else None
    gpus = count_gpus(p.data for p in got.procs) if got.procs is not None else None
    ib = sum(1 for f in functions if (f.kind or "").lower() == "infiniband") if functions is not None else None
    return HostInventory(
        system=parse_system(system.data),
        nics=nics,
        functions=functions,
        pxe_devices=pxe_devices,
        pxe=pxe,
        bmc_firmware=fw if isinstance(fw, str) else None,
        gpus=gpus,
        ib_functions=ib,
        cross_check=_cross_check(nics, functions),
        notes=tuple(notes),
        raw=_raw(system, got, attributes),
    )


def check_inventory(inventory: HostInventory, host_class: HostClass) -> None:
    """Raise HostProblem when the inventory stops the bring-up: no usable PXE NIC, or hardware other
    than the host class expects. Counts the BMC does not expose are not judged."""
    evidence = {"inventory": inventory.summary(), "raw": inventory.raw}
    if inventory.pxe.problem:
        raise HostProblem(inventory.pxe.problem, inventory.pxe.detail, evidence)
    wrong = []
    if host_class.gpu and inventory.gpus is not None and inventory.gpus != host_class.gpu.count:
        wrong.append(f"{inventory.gpus} GPUs where the host class expects {host_class.gpu.count}")
    if host_class.ib and inventory.ib_functions is not None and inventory.ib_functions != host_class.ib.hca_count:
        wrong.append(f"{inventory.ib_functions} InfiniBand functions where the host class expects "
                     f"{host_class.ib.hca_count}")
    if wrong:
        raise HostProblem("unexpected_hardware", "; ".join(wrong), evidence)
