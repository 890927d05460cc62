"""Update tasks (`TaskService/Tasks/<id>`) and the simulated iDRAC's job queue:
`/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/Jobs/<JID>` (`#DellJob`) and the same jobs as DMTF Jobs under
`/redfish/v1/JobService/Jobs/<JID>` (REFERENCE-wave3 B4: dell/iDRAC-Redfish-Scripting DeleteJobQueueREDFISH and
GetSetBiosAttributesREDFISH; DellJob samples in dellemc-openmanage-ansible-modules and gofish's Dell OEM test).
Served at those URIs but not linked: the real R650 links the queue from its Manager (`Links.Oem.Dell.Jobs`,
realdata/2_redfish/dell_idrac9_r650), whose Dell OEM schemas the simulator's `$metadata` cannot reference (DSP8010
has none), so the DMTF Service Validator would report them; the client reads the link where there is one, else
Dell's documented URI (provision/firmware/jobs.py).

A firmware update is a `FirmwareUpdate` job (its id is the task's, `JID_<n>`): Running while the image comes
and is checked, `Scheduled` ("Task successfully scheduled.") once a host firmware image is staged for the next
reboot, `Completed` when that reboot installed it (or at once for the iDRAC's own firmware), `Failed` otherwise.
A PATCH to Bios/Settings with OnReset is a `BIOSConfiguration` job, Scheduled until the reboot that applies it.
The DMTF Job carries `JobState` Pending for Scheduled (DMTF has no Scheduled), Running, Completed, Exception for
Failed, and the DellJob in `Oem.Dell`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sim.redfish import tree

DELL_JOBS = f"{tree.MANAGER}/Oem/Dell/Jobs"
JOB_SERVICE = f"{tree.V1}/JobService"
JOBS = f"{JOB_SERVICE}/Jobs"
TASKS = f"{tree.V1}/TaskService/Tasks"
_DMTF_STATE = {"Scheduled": "Pending", "Running": "Running", "Completed": "Completed", "Failed": "Exception",
               "New": "New"}
_MESSAGE_IDS = {"Scheduled": "JCP001", "Completed": "RED001", "Failed": "RED999", "Running": "RED030", "New": "JCP000"}


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when))


@dataclass
class SimTask:
    id: str
    dell: bool = True  # an iDRAC's task carries its job's Oem.Dell
    state: str = "New"
    percent: int = 0
    messages: list[dict[str, str]] = field(default_factory=list)
    start: float = field(default_factory=time.time)
    end: float | None = None

    def resource(self) -> dict[str, Any]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(self.start))
        health = {"Completed": "OK", "Exception": "Critical"}.get(self.state, "OK")
        out: dict[str, Any] = {
            "@odata.id": f"{TASKS}/{self.id}", "@odata.type": "#Task.v1_5_1.Task", "Id": self.id, "Name": "Task",
            "TaskState": self.state, "TaskStatus": health, "PercentComplete": self.percent,
            "Messages": list(self.messages), "StartTime": stamp, "TaskMonitor": f"{TASKS}/{self.id}"}
        if self.dell:
            out["Oem"] = {"Dell": {"JobState": {"Completed": "Completed", "Exception": "Failed"}.get(
                self.state, "Running"), "JobType": "FirmwareUpdate", "PercentComplete": self.percent}}
        if self.end is not None:
            out["EndTime"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(self.end))
        return out


@dataclass
class DellJob:
    id: str
    job_type: str  # FirmwareUpdate | BIOSConfiguration
    name: str
    state: str = "New"  # New, Running, Scheduled, Completed, Failed
    message: str = "Job created."
    percent: int = 0
    start: float = field(default_factory=time.time)
    target: str | None = None  # TargetSettingsURI

    def move(self, state: str, message: str, percent: int | None = None) -> None:
        self.state, self.message = state, message
        if percent is not None:
            self.percent = percent

    def dell(self) -> dict[str, Any]:
        return {"@odata.id": f"{DELL_JOBS}/{self.id}", "@odata.type": "#DellJob.v1_5_0.DellJob", "Id": self.id,
                "Name": self.name, "JobType": self.job_type, "JobState": self.state, "Message": self.message,
                "MessageId": f"IDRAC.2.8.{_MESSAGE_IDS.get(self.state, 'SYS051')}", "PercentComplete": self.percent,
                "StartTime": _stamp(self.start), "TargetSettingsURI": self.target,
                "CompletionTime": _stamp(time.time()) if self.state in ("Completed", "Failed") else None}

    def dmtf(self) -> dict[str, Any]:
        return {"@odata.id": f"{JOBS}/{self.id}", "@odata.type": "#Job.v1_2_1.Job", "Id": self.id, "Name": self.name,
                "JobState": _DMTF_STATE[self.state], "PercentComplete": self.percent, "StartTime": _stamp(self.start),
                "Messages": [{"Message": self.message}], "Oem": {"Dell": self.dell()}}


@dataclass
class JobQueue:
    jobs: dict[str, DellJob] = field(default_factory=dict)

    def add(self, job: DellJob) -> DellJob:
        self.jobs[job.id] = job
        return job

    def scheduled(self, job_type: str) -> list[DellJob]:
        return [j for j in self.jobs.values() if j.job_type == job_type and j.state == "Scheduled"]

    def resource(self, path: str) -> dict[str, Any] | None:
        if path == JOB_SERVICE:
            return {"@odata.id": JOB_SERVICE, "@odata.type": "#JobService.v1_0_3.JobService", "Id": "JobService",
                    "Name": "Job Service", "ServiceEnabled": True, "Jobs": tree.ref(JOBS)}
        for base, render in ((JOBS, DellJob.dmtf), (DELL_JOBS, DellJob.dell)):
            if path == base:
                return tree.collection(base, "Job" if base == JOBS else "DellJob", "Job Collection",
                                       [f"{base}/{j}" for j in self.jobs])
            if path.startswith(base + "/"):
                job = self.jobs.get(path.rsplit("/", 1)[1])
                return None if job is None else render(job)
        return None
