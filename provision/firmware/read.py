"""Reading a BMC's firmware inventory, BIOS attributes and pending jobs through the Redfish client.

ServiceRoot -> `UpdateService` -> `FirmwareInventory` (members, bounded) and the ComputerSystem -> `Bios`. A
BMC that has no UpdateService or no Bios (a 404, or no link) leaves that part None: the judgement calls it
unknown, never "on baseline". Every other Redfish error is the host's failure (bmc_* reasons).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from provision.bmc.harvest import find_system
from provision.firmware.bios_resource import BiosState, parse_bios
from provision.firmware.components import Component, parse_components
from provision.firmware.jobs import PendingJob, read_jobs, staged_for
from provision.redfish import RedfishClient, RedfishNotFound, RedfishUnsupported, Resource

MAX_COMPONENTS = 512


@dataclass(frozen=True)
class HostFirmware:
    components: tuple[Component, ...] | None  # None: the BMC has no FirmwareInventory we could read
    bios: BiosState | None
    update_service: str | None = None  # the UpdateService path
    simple_update: str | None = None  # the SimpleUpdate action's target
    multipart_push: str | None = None  # the UpdateService's MultipartHttpPushUri
    system: str | None = None  # the ComputerSystem path
    notes: tuple[str, ...] = ()
    jobs: tuple[PendingJob, ...] | None = None  # the BMC's pending jobs (jobs.py); None: it keeps no job queue
    hpe_progress: bool = False  # an iLO: an update's progress is the UpdateService's Oem.Hpe.State, not a task

    def as_json(self) -> dict[str, Any]:
        return {"components": None if self.components is None else [c.as_json() for c in self.components],
                "bios": None if self.bios is None else self.bios.as_json(), "update_service": self.update_service,
                "simple_update": self.simple_update, "multipart_push": self.multipart_push, "system": self.system,
                "notes": list(self.notes), "jobs": None if self.jobs is None else [j.as_json() for j in self.jobs],
                "hpe_progress": self.hpe_progress}

    def staged_job(self, keys: Collection[str]) -> PendingJob | None:
        """The Scheduled job that installs one of these components (by key) at the next reboot: a killed run's
        update the BMC holds, which an apply activates with a reboot rather than sending it again."""
        return staged_for(self.jobs, [c.name for c in self.components or () if c.key in keys])

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostFirmware:
        comps = data.get("components")
        bios = data.get("bios")
        return cls(None if comps is None else tuple(Component.from_json(c) for c in comps),
                   None if bios is None else BiosState.from_json(bios), data.get("update_service"),
                   data.get("simple_update"), data.get("multipart_push"), data.get("system"),
                   tuple(data.get("notes") or ()),
                   None if data.get("jobs") is None else tuple(PendingJob.from_json(j) for j in data["jobs"]),
                   bool(data.get("hpe_progress")))


def multipart_push_target(service: Mapping[str, Any]) -> str | None:
    target = service.get("MultipartHttpPushUri")
    return target if isinstance(target, str) and target.startswith("/") else None


def hpe_progress(service: Mapping[str, Any]) -> bool:
    """Whether the UpdateService reports an update's progress as HPE iLO does (`Oem.Hpe.State`)."""
    oem = service.get("Oem")
    hpe = oem.get("Hpe") if isinstance(oem, Mapping) else None
    return isinstance(hpe, Mapping) and isinstance(hpe.get("State"), str)


def simple_update_target(service: Mapping[str, Any]) -> str | None:
    actions = service.get("Actions")
    action = actions.get("#UpdateService.SimpleUpdate") if isinstance(actions, Mapping) else None
    target = action.get("target") if isinstance(action, Mapping) else None
    return target if isinstance(target, str) and target.startswith("/") else None


async def _components(bmc: RedfishClient, root: Resource, notes: list[str]
                      ) -> tuple[tuple[Component, ...] | None, str | None, Mapping[str, Any]]:
    service_path = root.link("UpdateService")
    if service_path is None:
        notes.append("the service root has no UpdateService")
        return None, None, {}
    try:
        service = await bmc.get(service_path)
        inventory = service.link("FirmwareInventory")
        if inventory is None:
            notes.append("the UpdateService has no FirmwareInventory")
            return None, service_path, service.data
        listing = await bmc.get_expanded(inventory, 1)  # members inline where the BMC offers $expand
        raw = listing.data.get("Members")
        if isinstance(raw, list) and len(raw) > MAX_COMPONENTS:
            notes.append(f"FirmwareInventory lists {len(raw)} members; the first {MAX_COMPONENTS} were read")
            kept = {k: v for k, v in listing.data.items() if k != "Members@odata.nextLink"}
            listing = Resource(listing.path, {**kept, "Members": raw[:MAX_COMPONENTS]}, listing.etag)
        members = await bmc.members(listing)
    except (RedfishNotFound, RedfishUnsupported) as exc:
        notes.append(f"firmware inventory not served: {exc}")
        return None, service_path, {}
    return parse_components([m.data for m in members]), service_path, service.data


async def _bios(bmc: RedfishClient, system: Resource, notes: list[str]) -> BiosState | None:
    path = system.link("Bios")
    if path is None:
        notes.append("the ComputerSystem has no Bios link")
        return None
    try:
        found = await bmc.get(path)
    except (RedfishNotFound, RedfishUnsupported) as exc:
        notes.append(f"Bios not served: {exc}")
        return None
    return parse_bios(found.data, found.path)


async def read_firmware(bmc: RedfishClient, *, bios: bool = True) -> HostFirmware:
    """What one (open) BMC reports: its installed firmware components and its BIOS attributes."""
    notes: list[str] = []
    root = await bmc.root()
    components, service, update = await _components(bmc, root, notes)
    state = None
    system = None
    if bios:
        system = await find_system(bmc)
        state = await _bios(bmc, system, notes)
    jobs = await read_jobs(bmc, root, notes, system)
    return HostFirmware(components, state, service, simple_update_target(update), multipart_push_target(update),
                        None if system is None else system.path, tuple(notes), jobs, hpe_progress(update))
