"""Whether a machine the MAAS simulator powers on for a PXE boot reaches the rack controller at all.

MAAS commissions and deploys a machine by PXE-booting it from its boot interface: the NIC's DHCP request has
to cross its top-of-rack switch on the PXE VLAN. The simulator asks the lab's switches as they are built
(`sim/switches`' as-built file, the cabling with `ethernet-faults.yml` applied, read at each boot): a boot MAC
the lab's Ethernet cables boots only when a connected port learns it on the PXE VLAN. One whose cable is
unplugged, whose port is error-disabled, or which sends nothing the port learns never boots; MAAS hears
nothing from it and, as its status monitor does when a node's status expires, fails the operation with
"Node operation '<status>' timed out after <node_timeout> minutes." (maasserver/status_monitor.py) once the
simulated wait has passed. A MAC outside the lab's Ethernet (no as-built, or a NIC it does not cable) boots.

Config keys (maas.json, written by sim/maas/service.py): `pxe: {asbuilt, vlan, macs}`, `boot_timeout_seconds`
(the simulated wait), `node_timeout_minutes` (what the message says: MAAS's default is 20).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ASBUILT_BYTES = 16 << 20


@dataclass(frozen=True)
class PxeNetwork:
    asbuilt: Path | None = None
    vlan: int = 0
    macs: frozenset[str] = frozenset()
    boot_timeout_s: float = 4.0
    node_timeout_min: int = 20

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> PxeNetwork:
        pxe = config.get("pxe") or {}
        path = pxe.get("asbuilt")
        return cls(Path(path) if path else None, int(pxe.get("vlan", 0)),
                   frozenset(str(m).lower() for m in pxe.get("macs", [])),
                   float(config.get("boot_timeout_seconds", 4.0)), int(config.get("node_timeout_minutes", 20)))

    def boots(self, mac: str) -> bool:
        """Whether a PXE boot from `mac` reaches the rack controller through the switches as they are now."""
        mac = mac.lower()
        if self.asbuilt is None or mac not in self.macs:
            return True
        try:
            with open(self.asbuilt, "rb") as f:
                data = json.loads(f.read(MAX_ASBUILT_BYTES))
        except (OSError, ValueError):
            return True  # no switch simulator for this lab: nothing to say the boot fails
        for switch in data.get("switches", []):
            for port in switch.get("ports", []):
                if port.get("status") == "connected" and [mac, self.vlan] in port.get("macs", []):
                    return True
        return False

    def timed_out(self, operation: str) -> str:
        return f"Node operation '{operation}' timed out after {self.node_timeout_min} minutes."
