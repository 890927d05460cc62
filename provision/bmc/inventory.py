"""Pure parsers from Redfish JSON to frozen inventory records, and the PXE NIC choice.

No I/O here: each function takes the JSON a BMC sent (already decoded) and returns dataclasses, so the
same code reads a live BMC, the simulator and the real iDRAC captures in the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provision.state.identifiers import nic_mac

_PXE_ATTR = re.compile(r"^PxeDev(\d+)(EnDis|Interface)$")
_ONBOARD = ("NIC.Embedded.", "NIC.Integrated.")
ETHERNET_INTERFACE = "EthernetInterface"
DEVICE_FUNCTION = "NetworkDeviceFunction"
PORT = "Port"
# NetDevFuncType values whose Ethernet.MACAddress is a MAC the host sends DHCP from; an FCoE function (a Cisco
# VIC's fc0) carries an Ethernet MAC too, but nothing boots or asks DHCP from it.
_ETHERNET_FUNCTIONS = frozenset({"ethernet", "iscsi"})


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _status(data: Mapping[str, Any], key: str) -> str | None:
    status = data.get("Status")
    return _str(status, key) if isinstance(status, Mapping) else None


@dataclass(frozen=True)
class Nic:
    id: str  # the FQDD on iDRAC (NIC.Integrated.1-1-1), the member Id elsewhere
    mac: str | None
    permanent_mac: str | None
    link: str | None  # LinkUp / LinkDown / NoLink as the BMC says it; None when it does not say
    speed_mbps: int | None
    enabled: bool | None
    description: str | None
    # Where the MAC was read: the system's EthernetInterface, or a chassis adapter's NetworkDeviceFunction or Port.
    source: str = ETHERNET_INTERFACE

    @property
    def function_id(self) -> str | None:
        """The NetworkDeviceFunction's own Id (`eth0`, `NIC.Integrated.1-1-1`) of a NIC read from one."""
        return self.id.rsplit("/", 1)[-1] if self.source == DEVICE_FUNCTION else None

    @property
    def link_up(self) -> bool | None:
        if self.link is None:
            return None
        return self.link.lower() in ("linkup", "up")

    @property
    def onboard(self) -> bool:
        return self.id.startswith(_ONBOARD)


def parse_ethernet_interface(data: Mapping[str, Any]) -> Nic:
    speed = data.get("SpeedMbps")
    enabled = data.get("InterfaceEnabled")
    return Nic(
        id=_str(data, "Id") or str(data.get("@odata.id", "")).rsplit("/", 1)[-1],
        mac=nic_mac(data.get("MACAddress")) or nic_mac(data.get("PermanentMACAddress")),
        permanent_mac=nic_mac(data.get("PermanentMACAddress")),
        link=_str(data, "LinkStatus"),
        speed_mbps=speed if isinstance(speed, int) and not isinstance(speed, bool) else None,
        enabled=enabled if isinstance(enabled, bool) else None,
        description=_str(data, "Description"),
    )


@dataclass(frozen=True)
class NetworkFunction:
    id: str
    kind: str | None  # NetDevFuncType: Ethernet, InfiniBand, FibreChannel, ...
    mac: str | None


def parse_network_device_function(data: Mapping[str, Any]) -> NetworkFunction:
    eth = data.get("Ethernet")
    mac = None
    if isinstance(eth, Mapping):
        mac = nic_mac(eth.get("MACAddress")) or nic_mac(eth.get("PermanentMACAddress"))
    return NetworkFunction(
        id=_str(data, "Id") or str(data.get("@odata.id", "")).rsplit("/", 1)[-1],
        kind=_str(data, "NetDevFuncType"),
        mac=mac,
    )


def is_ethernet_function(function: NetworkFunction) -> bool:
    """Whether a NetworkDeviceFunction is a NIC the host can PXE-boot or DHCP from: of an Ethernet or iSCSI type
    (or of no stated type) and with a MAC."""
    return function.mac is not None and (function.kind is None or function.kind.lower() in _ETHERNET_FUNCTIONS)


def _member_id(data: Mapping[str, Any]) -> str:
    return _str(data, "Id") or str(data.get("@odata.id", "")).rsplit("/", 1)[-1]


def nic_from_function(adapter: str, data: Mapping[str, Any]) -> Nic:
    """A chassis NetworkDeviceFunction as a NIC named `<adapter>/<function>` (for a system without
    EthernetInterfaces): its `Ethernet.MACAddress`, else the permanent one."""
    fn = parse_network_device_function(data)
    eth = data.get("Ethernet")
    permanent = nic_mac(eth.get("PermanentMACAddress")) if isinstance(eth, Mapping) else None
    return Nic(id=f"{adapter}/{fn.id}", mac=fn.mac, permanent_mac=permanent, link=None, speed_mbps=None,
               enabled=None, description=fn.kind, source=DEVICE_FUNCTION)


def nic_from_port(adapter: str, data: Mapping[str, Any]) -> Nic:
    """A chassis adapter's Port (Redfish 1.17 `Port`) as a NIC named `<adapter>/<port>`: the first usable
    MAC of `Ethernet.AssociatedMACAddresses`, its `LinkStatus` and `CurrentSpeedGbps`."""
    eth = data.get("Ethernet")
    macs = eth.get("AssociatedMACAddresses") if isinstance(eth, Mapping) else None
    found = [m for m in (nic_mac(v) for v in (macs if isinstance(macs, list) else [])) if m]
    speed = data.get("CurrentSpeedGbps")
    mbps = None
    if isinstance(speed, (int, float)) and not isinstance(speed, bool) and 0 < speed < 1e6:
        mbps = int(speed * 1000)
    return Nic(id=f"{adapter}/{_member_id(data)}", mac=found[0] if found else None, permanent_mac=None,
               link=_str(data, "LinkStatus"), speed_mbps=mbps, enabled=None,
               description=_str(data, "LinkNetworkTechnology") or _str(data, "PortProtocol"), source=PORT)


@dataclass(frozen=True)
class SystemInfo:
    id: str
    manufacturer: str | None
    model: str | None
    serial: str | None
    service_tag: str | None
    bios_version: str | None
    power_state: str | None
    health: str | None
    health_rollup: str | None
    uuid: str | None


def parse_system(data: Mapping[str, Any]) -> SystemInfo:
    manufacturer = _str(data, "Manufacturer")
    tag = None
    # Dell keeps the service tag in SKU (SerialNumber is the board's); others have no such field.
    if manufacturer and manufacturer.lower().startswith("dell"):
        tag = _str(data, "SKU")
    return SystemInfo(
        id=_str(data, "Id") or str(data.get("@odata.id", "")).rsplit("/", 1)[-1],
        manufacturer=manufacturer,
        model=_str(data, "Model"),
        serial=_str(data, "SerialNumber"),
        service_tag=tag,
        bios_version=_str(data, "BiosVersion"),
        power_state=_str(data, "PowerState"),
        health=_status(data, "Health"),
        health_rollup=_status(data, "HealthRollup"),
        uuid=_str(data, "UUID"),
    )


@dataclass(frozen=True)
class PxeDevice:
    index: int
    interface: str | None
    enabled: bool


def parse_bios_pxe(attributes: Mapping[str, Any]) -> tuple[PxeDevice, ...]:
    """The iDRAC BIOS's UEFI PXE devices (`PxeDevNEnDis`/`PxeDevNInterface`), lowest N first."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        m = _PXE_ATTR.match(key)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return tuple(
        PxeDevice(i, v.get("Interface") if isinstance(v.get("Interface"), str) else None,
                  str(v.get("EnDis", "")).lower() == "enabled")
        for i, v in sorted(found.items())
    )


def count_gpus(processors: Iterable[Mapping[str, Any]]) -> int:
    return sum(1 for p in processors if str(p.get("ProcessorType", "")).upper() == "GPU")


@dataclass(frozen=True)
class PxeChoice:
    nic: Nic | None
    source: str  # bios:PxeDevN, site:<fqdd>, site:first-onboard-link-up
    problem: str | None  # None, or no_pxe_nic / pxe_nic_link_down
    detail: str


def find_nic(nics: Sequence[Nic], name: str) -> Nic | None:
    """The NIC a BIOS or site names: by its id, else a NetworkDeviceFunction by its own Id when one alone has it
    (a virtual NIC that exists only as `<adapter>/<function>`: a Cisco VIC's `eth0`, or an iDRAC FQDD that the
    system's EthernetInterfaces leave out)."""
    exact = [n for n in nics if n.id == name]
    if exact:
        return exact[0]
    by_function = [n for n in nics if n.function_id == name]
    return by_function[0] if len(by_function) == 1 else None


def choose_pxe_nic(nics: Sequence[Nic], pxe_devices: Sequence[PxeDevice], site_fqdd: str | None) -> PxeChoice:
    """Which NIC will PXE-boot: the BIOS's first enabled PXE device when it names one, else the site's
    rule (the host class's FQDD, or the first onboard NIC with link up). Either may name a NIC that exists
    only as a chassis NetworkDeviceFunction (`find_nic`)."""
    by_id = {n.id: n for n in nics}
    enabled = [d for d in pxe_devices if d.enabled and d.interface]
    if enabled:
        dev = enabled[0]
        source = f"bios:PxeDev{dev.index}"
        nic = find_nic(nics, dev.interface or "")
        if nic is None:
            return PxeChoice(None, source, "no_pxe_nic",
                             f"BIOS PxeDev{dev.index} boots from {dev.interface}, which the BMC does not list")
        return _check_link(nic, source)
    if site_fqdd:
        source = f"site:{site_fqdd}"
        nic = find_nic(nics, site_fqdd)
        if nic is None:
            why = "; the BIOS enables no PXE device" if pxe_devices else ""
            several = sorted(n.id for n in nics if n.function_id == site_fqdd)
            if several:
                return PxeChoice(None, source, "no_pxe_nic",
                                 f"the site's PXE NIC {site_fqdd} names {len(several)} NetworkDeviceFunctions "
                                 f"({', '.join(several)}): name one as <adapter>/<function>{why}")
            listed = ", ".join(sorted(by_id)) or "none"
            return PxeChoice(None, source, "no_pxe_nic",
                             f"the site's PXE NIC {site_fqdd} is not among the host's NICs ({listed}){why}")
        return _check_link(nic, source)
    onboard = sorted((n for n in nics if n.onboard), key=lambda n: n.id) or list(nics)
    for nic in onboard:
        if nic.link_up and nic.mac:
            return PxeChoice(nic, "site:first-onboard-link-up", None, f"{nic.id} is the first onboard NIC with link")
    for nic in onboard:
        if nic.link_up is None and nic.mac:  # the BMC does not report link: unknown is not down
            return PxeChoice(nic, "site:first-onboard-link-up", None,
                             f"{nic.id} is the first onboard NIC; the BMC reports no link status")
    if onboard:
        return PxeChoice(None, "site:first-onboard-link-up", "pxe_nic_link_down",
                         f"no onboard NIC has link ({', '.join(n.id for n in onboard)})")
    return PxeChoice(None, "site:first-onboard-link-up", "no_pxe_nic", "the BMC lists no NICs")


def _check_link(nic: Nic, source: str) -> PxeChoice:
    if nic.mac is None:
        return PxeChoice(nic, source, "no_pxe_nic", f"{nic.id} has no usable MAC address")
    if nic.link_up is False:
        return PxeChoice(nic, source, "pxe_nic_link_down",
                         f"{nic.id} ({nic.mac}) reports {nic.link}: check the cable and the switch port")
    return PxeChoice(nic, source, None, f"{nic.id} ({nic.mac})")
