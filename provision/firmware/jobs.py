"""A BMC's job queue: what it has staged or scheduled and not yet done. Parsing is pure; `read_jobs` reads.

Dell iDRAC (REFERENCE-wave3 B4): the Manager links its queue at `Links.Oem.Dell.Jobs` (real R650 crawl,
realdata/2_redfish/dell_idrac9_r650: `/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/Jobs`), read at that URI
under the Manager where the link is missing (Dell's scripts use it as is; a BMC without it answers 404); each
`#DellJob` has
`JobType` (FirmwareUpdate, BIOSConfiguration...), `JobState` (Scheduled, Running, Completed, Failed...),
`Name` ("Firmware Update: <component>", "Configure: BIOS.Setup.1-1"), `Message`. A host firmware update staged
for the next reboot is a Scheduled FirmwareUpdate job; a PATCH to Bios/Settings waiting for its reboot is a
Scheduled BIOSConfiguration job. Only the jobs not yet done are kept. A BMC without such a queue has none: the
jobs are then unknown (None), never "nothing pending".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provision.redfish import RedfishClient, RedfishNotFound, RedfishUnsupported, Resource, first_link
from provision.state.peer_text import shown

MAX_JOBS = 256
PENDING = frozenset({"Scheduled", "Pending", "New", "Running", "Waiting", "Downloaded", "Scheduling"})
FIRMWARE = "FirmwareUpdate"
BIOS_CONFIG = "BIOSConfiguration"


@dataclass(frozen=True)
class PendingJob:
    id: str
    job_type: str | None
    state: str
    name: str
    message: str | None

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.job_type, "state": self.state, "name": self.name, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingJob:
        return cls(str(data["id"]), data.get("type"), str(data["state"]), str(data["name"]), data.get("message"))


def _text(value: Any, limit: int = 160) -> str | None:
    return shown(value.strip()[:limit]) if isinstance(value, str) and value.strip() else None


def parse_job(data: Mapping[str, Any]) -> PendingJob | None:
    """One DellJob (or a DMTF Job carrying one in Oem.Dell); None for a job that is done or has no id."""
    oem = data.get("Oem")
    dell = oem.get("Dell") if isinstance(oem, Mapping) else None
    job = dell if isinstance(dell, Mapping) else data
    rid, state = _text(job.get("Id") or data.get("Id"), 64), _text(job.get("JobState"), 32)
    if rid is None or state is None or state not in PENDING:
        return None
    name = _text(job.get("Name")) or rid
    return PendingJob(rid, _text(job.get("JobType"), 64), state, name, _text(job.get("Message")))


def parse_jobs(members: Sequence[Mapping[str, Any]]) -> tuple[PendingJob, ...]:
    return tuple(j for m in members[:MAX_JOBS] if (j := parse_job(m)) is not None)


def staged_for(jobs: Sequence[PendingJob] | None, names: Sequence[str]) -> PendingJob | None:
    """The Scheduled firmware job that installs one of the components named (by their inventory names) at the next
    reboot. A DellJob names the component, not the version: the read-back after the reboot tells whether it was the
    one wanted."""
    wanted = {f"Firmware Update: {n}" for n in names}
    return next((j for j in jobs or () if j.job_type == FIRMWARE and j.state == "Scheduled" and j.name in wanted),
                None)


def bios_job(jobs: Sequence[PendingJob] | None) -> PendingJob | None:
    return next((j for j in jobs or () if j.job_type == BIOS_CONFIG and j.state == "Scheduled"), None)


async def read_jobs(bmc: RedfishClient, root: Resource, notes: list[str], system: Resource | None = None
                    ) -> tuple[PendingJob, ...] | None:
    """The pending jobs of the BMC's Dell job queue, found from its Manager (the system's ManagedBy where the
    system was read, else the first of the Managers); None where it has none."""
    target = first_link(system.data, "Links", "ManagedBy") if system is not None else None
    try:
        if target is None:
            managers = root.link("Managers")
            if managers is None:
                return None
            target = first_link((await bmc.get(managers)).data, "Members")
            if target is None:
                return None
        manager = await bmc.get(target)
        links = manager.data.get("Links")
        oem = links.get("Oem") if isinstance(links, Mapping) else None
        dell = oem.get("Dell") if isinstance(oem, Mapping) else None
        jobs = dell.get("Jobs") if isinstance(dell, Mapping) else None
        path = jobs.get("@odata.id") if isinstance(jobs, Mapping) else None
        if not isinstance(path, str) or not path.startswith("/redfish/"):
            path = f"{manager.path.rstrip('/')}/Oem/Dell/Jobs"  # Dell's documented URI; elsewhere a 404: none
        queue = await bmc.get_expanded(path, 1)
        raw = queue.data.get("Members")
        if isinstance(raw, list) and len(raw) > MAX_JOBS:
            notes.append(f"the job queue lists {len(raw)} jobs; the first {MAX_JOBS} were read")
            queue = Resource(queue.path, {"Members": raw[:MAX_JOBS]}, queue.etag)
        members = await bmc.members(queue)
    except RedfishNotFound:
        return None  # no Dell job queue: its jobs are unknown, not "none pending"
    except RedfishUnsupported as exc:
        notes.append(f"job queue not served: {exc}")
        return None
    return parse_jobs([m.data for m in members])
