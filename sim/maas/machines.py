"""The MAAS simulator's machine model: MAAS's node statuses and the transitions its API allows.

Statuses and names are MAAS's own (`maasserver.enum.NODE_STATUS`); an action asked of a machine in a
state that does not allow it is a `NodeStateViolation`, which MAAS answers with 409 Conflict.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import threading
from dataclasses import dataclass, field

from provision.maas.machine import MaasStatus

# MAAS's status numbers are the client's enum; the names MAAS shows for them (`status_name`) are
# written out here, so the records the simulator serves are still MAAS's own text.
NodeStatus = MaasStatus

STATUS_NAMES = {
    NodeStatus.NEW: "New",
    NodeStatus.COMMISSIONING: "Commissioning",
    NodeStatus.FAILED_COMMISSIONING: "Failed commissioning",
    NodeStatus.MISSING: "Missing",
    NodeStatus.READY: "Ready",
    NodeStatus.RESERVED: "Reserved",
    NodeStatus.DEPLOYED: "Deployed",
    NodeStatus.RETIRED: "Retired",
    NodeStatus.BROKEN: "Broken",
    NodeStatus.DEPLOYING: "Deploying",
    NodeStatus.ALLOCATED: "Allocated",
    NodeStatus.FAILED_DEPLOYMENT: "Failed deployment",
    NodeStatus.RELEASING: "Releasing",
    NodeStatus.FAILED_RELEASING: "Releasing failed",  # sic: maasserver/enum.py NODE_STATUS_CHOICES
    NodeStatus.DISK_ERASING: "Disk erasing",
    NodeStatus.FAILED_DISK_ERASING: "Failed disk erasing",
    NodeStatus.RESCUE_MODE: "Rescue mode",
    NodeStatus.ENTERING_RESCUE_MODE: "Entering rescue mode",
    NodeStatus.FAILED_ENTERING_RESCUE_MODE: "Failed to enter rescue mode",
    NodeStatus.EXITING_RESCUE_MODE: "Exiting rescue mode",
    NodeStatus.FAILED_EXITING_RESCUE_MODE: "Failed to exit rescue mode",
    NodeStatus.TESTING: "Testing",
    NodeStatus.FAILED_TESTING: "Failed testing",
}

COMMISSION_FROM = {
    NodeStatus.NEW,
    NodeStatus.READY,
    NodeStatus.FAILED_COMMISSIONING,
    NodeStatus.FAILED_DEPLOYMENT,
    NodeStatus.BROKEN,
}
DEPLOY_FROM = {NodeStatus.READY, NodeStatus.ALLOCATED}
RELEASE_FROM = {NodeStatus.ALLOCATED, NodeStatus.DEPLOYED, NodeStatus.FAILED_DEPLOYMENT, NodeStatus.DEPLOYING}


class NodeStateViolation(Exception):
    """An action the machine's current status does not allow (HTTP 409)."""


class ValidationFailed(Exception):
    """Bad form input; carries MAAS's `{field: [messages]}` body (HTTP 400)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


_ids = itertools.count(1)
# Where deployed machines get their address (MAAS's AUTO assignment from the deployment subnet): one per
# machine, after its boot interface's id, so a redeploy gets the same one.
DEPLOY_SUBNET = ipaddress.ip_network("10.64.16.0/20")
_ALPHABET = "abcdefghjkmnpqrstwxy0123456789"


def system_id_for(hostname: str) -> str:
    digest = hashlib.sha256(hostname.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:6])


@dataclass
class Machine:
    system_id: str
    hostname: str
    architecture: str
    macs: list[str]
    power_type: str
    power_parameters: dict[str, str]
    status: NodeStatus = NodeStatus.NEW
    status_message: str = ""
    power_state: str = "unknown"
    owner: str | None = None
    osystem: str = ""
    distro_series: str = ""
    interface_ids: list[int] = field(default_factory=list)
    ip_addresses: list[str] = field(default_factory=list)  # assigned on deployment (AUTO), freed on release
    commissioning_status: int = -1  # MAAS's SCRIPT_STATUS of the last commissioning; -1 when none ran ("Unknown")
    commissioning_result_id: int | None = None  # the id of the last commissioning's script set
    enlisting: bool = False  # enlisted anonymously: commissioning ends in New, for an admin to accept
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    generation: int = 0  # bumped on each action, so a stale timer does not complete a newer one

    def __post_init__(self) -> None:
        self.interface_ids = [next(_ids) for _ in self.macs]
