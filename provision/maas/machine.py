"""MAAS machine records as the bring-up reads them: a pure parse of the API's JSON."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from provision.maas.errors import MaasError
from provision.state.identifiers import canonical_mac


class MaasStatus(IntEnum):
    """MAAS's numeric node statuses (REFERENCE.md; maasserver.enum.NODE_STATUS)."""

    NEW = 0
    COMMISSIONING = 1
    FAILED_COMMISSIONING = 2
    MISSING = 3
    READY = 4
    RESERVED = 5
    DEPLOYED = 6
    RETIRED = 7
    BROKEN = 8
    DEPLOYING = 9
    ALLOCATED = 10
    FAILED_DEPLOYMENT = 11
    RELEASING = 12
    FAILED_RELEASING = 13
    DISK_ERASING = 14
    FAILED_DISK_ERASING = 15
    RESCUE_MODE = 16
    ENTERING_RESCUE_MODE = 17
    FAILED_ENTERING_RESCUE_MODE = 18
    EXITING_RESCUE_MODE = 19
    FAILED_EXITING_RESCUE_MODE = 20
    TESTING = 21
    FAILED_TESTING = 22


FAILED = {
    MaasStatus.FAILED_COMMISSIONING,
    MaasStatus.FAILED_DEPLOYMENT,
    MaasStatus.BROKEN,
    MaasStatus.FAILED_TESTING,
    MaasStatus.FAILED_RELEASING,
    MaasStatus.FAILED_DISK_ERASING,
}


@dataclass(frozen=True)
class MaasMachine:
    system_id: str
    hostname: str
    status: MaasStatus
    status_name: str
    status_message: str
    power_state: str
    macs: tuple[str, ...]
    boot_mac: str | None
    distro_series: str
    ip_addresses: tuple[str, ...] = ()  # the deployed OS's addresses, as MAAS assigned them

    @property
    def failed(self) -> bool:
        return self.status in FAILED


# What a record may hold before the rest is dropped: a real one has a few interfaces and short texts, and a
# hostile or broken region must not grow the evidence the bring-up stores.
MAX_INTERFACES = 64
MAX_ADDRESSES = 16
MAX_TEXT = 1024


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    return "" if value is None else str(value)[:limit]


def _mac_of(interface: Any) -> str | None:
    return canonical_mac(interface.get("mac_address")) if isinstance(interface, dict) else None


def parse_machine(data: Any) -> MaasMachine:
    """One machine from MAAS's record (MAAS 3.5 shows 79 fields; this reads the ones the bring-up uses).

    `macs` are the interfaces' MACs in MAAS's order, each once: a bond, bridge or VLAN interface carries a
    MAC of its parent. Lists and texts are cut at fixed bounds."""
    if not isinstance(data, dict):
        raise MaasError(f"MAAS machine record is not an object: {str(data)[:80]}")
    try:
        status = MaasStatus(int(data["status"]))
        interfaces = data.get("interface_set") or []
        if not isinstance(interfaces, list):
            raise TypeError("interface_set")
        macs = dict.fromkeys(m for m in map(_mac_of, interfaces[:MAX_INTERFACES]) if m)
        addresses = data.get("ip_addresses") or []
        if not isinstance(addresses, list):
            raise TypeError("ip_addresses")
        return MaasMachine(
            system_id=_text(data["system_id"], 64),
            hostname=_text(data["hostname"], 255),
            status=status,
            status_name=_text(data.get("status_name") or status.name, 64),
            status_message=_text(data.get("status_message")),
            power_state=_text(data.get("power_state") or "unknown", 32),
            macs=tuple(macs),
            boot_mac=_mac_of(data.get("boot_interface")),
            distro_series=_text(data.get("distro_series"), 64),
            ip_addresses=tuple(str(a)[:64] for a in addresses[:MAX_ADDRESSES] if isinstance(a, str)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MaasError(f"MAAS machine record lacks or garbles {exc}") from None
