"""What a simulated server is: its NICs, MACs, serials and firmware, derived from the site alone.

Everything is a pure function of (site name, host name, host class), so the same site always yields
the same MACs and service tags (a test can predict them) and two sites never share a MAC. MACs are
locally administered unicast (first octet 0x02), so they cannot collide with a real vendor's OUI.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from provision.site import Host, Site

_TAG_ALPHABET = "0123456789BCDFGHJKLMNPQRSTVWXYZ"
DEFAULT_BIOS = "1.14.1"
DEFAULT_BMC_FIRMWARE = "7.10.30.00"


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("/".join(parts).encode()).digest()


def mac_for(site: str, hostname: str, fqdd: str) -> str:
    raw = bytes([0x02]) + _digest(site, hostname, fqdd)[:5]
    return ":".join(f"{b:02X}" for b in raw)


def guid_for(site: str, hostname: str, port: str) -> str:
    """A ConnectX port GUID, 16 hex digits: 3 vendor bytes, `0300`, 3 more (as in ibnetdiscover output of
    ConnectX HCAs, e.g. 0x1c34da03005ebfc8 in ../shared/realdata/1_infiniband/). The first byte is
    locally administered, as the MACs' are."""
    raw = bytes([0x02]) + _digest(site, hostname, port)[:5]
    return (raw[:3] + bytes([0x03, 0x00]) + raw[3:]).hex()


def _tag(seed: bytes, length: int) -> str:
    n = int.from_bytes(seed, "big")
    out = []
    for _ in range(length):
        n, i = divmod(n, len(_TAG_ALPHABET))
        out.append(_TAG_ALPHABET[i])
    return "".join(out)


@dataclass(frozen=True)
class Nic:
    fqdd: str  # e.g. NIC.Integrated.1-1-1: adapter NIC.Integrated.1, port 1, partition 1
    adapter: str
    port: str
    mac: str
    speed_mbps: int
    link_up: bool
    description: str
    model: str
    manufacturer: str


@dataclass(frozen=True)
class Hca:
    adapter: str
    function: str
    port_guid: str  # 16 lower-case hex digits, no separators


@dataclass(frozen=True)
class ServerIdentity:
    site: str
    hostname: str
    address: str
    port: int
    model: str
    service_tag: str
    serial: str
    uuid: str
    bios_version: str
    bmc_firmware: str
    nics: tuple[Nic, ...]
    pxe_fqdd: str
    gpu_model: str | None
    gpu_count: int
    hcas: tuple[Hca, ...]


_ONBOARD = (
    ("NIC.Embedded.1-1-1", "NIC.Embedded.1", "NIC.Embedded.1-1", 1000, False, "Embedded NIC 1 Port 1 Partition 1",
     "Broadcom Gigabit Ethernet BCM5720", "Broadcom Inc. and subsidiaries"),
    ("NIC.Embedded.2-1-1", "NIC.Embedded.1", "NIC.Embedded.2-1", 1000, False, "Embedded NIC 2 Port 1 Partition 1",
     "Broadcom Gigabit Ethernet BCM5720", "Broadcom Inc. and subsidiaries"),
    ("NIC.Integrated.1-1-1", "NIC.Integrated.1", "NIC.Integrated.1-1", 25000, True,
     "Integrated NIC 1 Port 1 Partition 1", "MLNX 25GbE 2P ConnectX6Lx OCP3 NIC", "Mellanox Technologies"),
    ("NIC.Integrated.1-2-1", "NIC.Integrated.1", "NIC.Integrated.1-2", 25000, True,
     "Integrated NIC 1 Port 2 Partition 1", "MLNX 25GbE 2P ConnectX6Lx OCP3 NIC", "Mellanox Technologies"),
)


def _adapter_of(fqdd: str) -> tuple[str, str]:
    """`NIC.Slot.3-1-1` → adapter `NIC.Slot.3`, port `NIC.Slot.3-1` (the iDRAC FQDD grammar)."""
    head, _, rest = fqdd.partition("-")
    port = rest.split("-")[0] if rest else "1"
    return head, f"{head}-{port}"


def identity(site: Site, host: Host) -> ServerIdentity:
    cls = site.host_class(host)
    name = site.name
    nics = [
        Nic(fqdd, adapter, port, mac_for(name, host.hostname, fqdd), speed, up, desc, model, vendor)
        for fqdd, adapter, port, speed, up, desc, model, vendor in _ONBOARD
    ]
    pxe = cls.pxe_nic or "NIC.Integrated.1-1-1"
    if pxe not in {n.fqdd for n in nics}:
        adapter, port = _adapter_of(pxe)
        nics.append(Nic(pxe, adapter, port, mac_for(name, host.hostname, pxe), 25000, True, f"{pxe} (PXE)",
                        "MLNX 25GbE 2P ConnectX6Lx Adapter", "Mellanox Technologies"))
    hcas = tuple(
        Hca(f"InfiniBand.Slot.{31 + i}", f"InfiniBand.Slot.{31 + i}-1", guid_for(name, host.hostname, f"ib{i}"))
        for i in range(cls.ib.hca_count if cls.ib else 0)
    )
    seed = _digest(name, host.hostname, "identity")
    uuid = seed[:16].hex()
    return ServerIdentity(
        site=name,
        hostname=host.hostname,
        address=host.bmc.address,
        port=host.bmc.port,
        model="PowerEdge XE9680" if cls.gpu and cls.gpu.count else "PowerEdge R660",
        service_tag=_tag(seed[:8], 7),
        serial="CN" + _tag(seed[8:16], 12),
        uuid=f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}",
        bios_version=cls.versions.bios or DEFAULT_BIOS,
        bmc_firmware=cls.versions.bmc_firmware or DEFAULT_BMC_FIRMWARE,
        nics=tuple(nics),
        pxe_fqdd=pxe,
        gpu_model=cls.gpu.model if cls.gpu else None,
        gpu_count=cls.gpu.count if cls.gpu else 0,
        hcas=hcas,
    )
