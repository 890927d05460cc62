"""NICs of a ComputerSystem that has no EthernetInterfaces: read from the chassis' NetworkAdapters instead.

Some BMCs (Supermicro's GB300, Redfish 1.17) list a host's NICs only as
`Chassis/{id}/NetworkAdapters/{adapter}/Ports/{port}` (`Ethernet.AssociatedMACAddresses`) and
`.../NetworkDeviceFunctions/{fn}` (`Ethernet.MACAddress`), under chassis other than the one the system links to
(the I/O board, a riser's DPU). Every chassis is visited, the system's own first; a member the BMC does not
serve is noted and skipped, and every place looked at is kept, so "no MAC anywhere" can say where it looked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.aio import gather_or_cancel
from provision.bmc.inventory import (
    Nic,
    is_ethernet_function,
    nic_from_function,
    nic_from_port,
    parse_network_device_function,
)
from provision.redfish import NOT_SERVED, RedfishClient, Resource, odata_id

# Bounds on what a hostile or huge service can make one harvest read.
MAX_CHASSIS = 64
MAX_ADAPTERS = 32
MAX_PER_ADAPTER = 32


@dataclass
class ChassisNics:
    nics: list[Nic] = field(default_factory=list)
    looked: list[str] = field(default_factory=list)  # one line per place read, with what it held
    raw: list[dict[str, Any]] = field(default_factory=list)  # what each NIC was read from, as the BMC sent it


async def _get(client: RedfishClient, path: str, out: ChassisNics) -> Resource | None:
    try:
        return await client.get(path)
    except NOT_SERVED as exc:
        out.looked.append(f"{path}: {exc.detail}")
        return None


async def _each(client: RedfishClient, parent: Resource, key: str, limit: int, out: ChassisNics) -> list[Resource]:
    """Members of the collection `parent` links to under `key`, each read on its own (one missing is noted)."""
    value = parent.data.get(key)
    collection: Resource | None = None
    if isinstance(value, Mapping) and isinstance(value.get("Members"), list):
        collection = Resource(odata_id(value) or parent.path, value)  # expanded inline
    else:
        path = odata_id(value)
        collection = await _get(client, path, out) if path else None
    members = collection.data.get("Members") if collection is not None else None
    if not isinstance(members, list):
        return []
    found: list[Resource] = []
    wanted: list[str] = []
    for m in members[:limit]:
        if isinstance(m, Mapping) and len(m) > 1 and odata_id(m):
            found.append(Resource(odata_id(m) or "", m))
        elif odata_id(m):
            wanted.append(odata_id(m) or "")
    fetched = await gather_or_cancel(*(_get(client, p, out) for p in wanted)) if wanted else []
    return found + [r for r in fetched if r is not None]


async def _chassis_paths(client: RedfishClient, system: Resource, out: ChassisNics) -> list[str]:
    links = system.data.get("Links")
    linked = links.get("Chassis") if isinstance(links, Mapping) else None
    paths = [p for p in (odata_id(c) for c in (linked if isinstance(linked, list) else [])) if p]
    collection = (await client.root()).link("Chassis")
    if collection:
        listing = await _get(client, collection, out)
        members = listing.data.get("Members") if listing is not None else None
        paths += [p for p in (odata_id(m) for m in (members if isinstance(members, list) else [])) if p]
    return list(dict.fromkeys(paths))[:MAX_CHASSIS]


async def _adapter(client: RedfishClient, adapter: Resource, out: ChassisNics) -> None:
    name = str(adapter.data.get("Id") or adapter.path.rsplit("/", 1)[-1])
    functions = await _each(client, adapter, "NetworkDeviceFunctions", MAX_PER_ADAPTER, out)
    ports = await _each(client, adapter, "Ports", MAX_PER_ADAPTER, out)
    seen = {n.mac for n in out.nics if n.mac}
    added = 0
    other = 0  # FCoE, InfiniBand...: a MAC or none, but no NIC the host boots or asks DHCP from
    for kind, resources in (("function", functions), ("port", ports)):
        for r in resources:
            if kind == "function":
                fn = parse_network_device_function(r.data)
                if fn.mac is not None and not is_ethernet_function(fn):
                    other += 1
                    continue
            nic = nic_from_function(name, r.data) if kind == "function" else nic_from_port(name, r.data)
            if nic.mac is not None:
                if nic.mac in seen:
                    continue  # a port's associated MAC that its function already gave
                seen.add(nic.mac)
                added += 1
            out.nics.append(nic)
            out.raw.append({k: r.data.get(k) for k in ("@odata.id", "Id", "LinkStatus", "Ethernet") if k in r.data})
    skipped = f" ({other} not Ethernet)" if other else ""
    out.looked.append(f"{adapter.path}: {len(ports)} port(s), {len(functions)} NetworkDeviceFunction(s){skipped}, "
                      f"{added} MAC address(es)")


async def chassis_nics(client: RedfishClient, system: Resource) -> ChassisNics:
    """Every NIC the chassis' NetworkAdapters describe (ports and functions), and where it looked."""
    out = ChassisNics()
    for path in await _chassis_paths(client, system, out):
        chassis = await _get(client, path, out)
        if chassis is None:
            continue
        if chassis.link("NetworkAdapters") is None and not isinstance(chassis.data.get("NetworkAdapters"), Mapping):
            out.looked.append(f"{path}: no NetworkAdapters")
            continue
        for adapter in await _each(client, chassis, "NetworkAdapters", MAX_ADAPTERS, out):
            await _adapter(client, adapter, out)
    return out
