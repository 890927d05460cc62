"""MAAS machine records as the bring-up reads them: a pure parse of the API's JSON."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from provision.maas.errors import MaasError


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


def parse_machine(data: Any) -> MaasMachine:
    if not isinstance(data, dict):
        raise MaasError(f"MAAS machine record is not an object: {str(data)[:80]}")
    try:
        status = MaasStatus(int(data["status"]))
        interfaces = data.get("interface_set") or []
        boot = data.get("boot_interface") or {}
        return MaasMachine(
            system_id=str(data["system_id"]),
            hostname=str(data["hostname"]),
            status=status,
            status_name=str(data.get("status_name", status.name)),
            status_message=str(data.get("status_message") or ""),
            power_state=str(data.get("power_state") or "unknown"),
            macs=tuple(str(i["mac_address"]).lower() for i in interfaces if i.get("mac_address")),
            boot_mac=str(boot["mac_address"]).lower() if boot.get("mac_address") else None,
            distro_series=str(data.get("distro_series") or ""),
            ip_addresses=tuple(str(a) for a in (data.get("ip_addresses") or []) if isinstance(a, str))[:16],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MaasError(f"MAAS machine record lacks or garbles {exc}") from None
