"""The simulated UFM's jobs: what `POST /ufmRest/actions` starts, running after the 202 that answers it.

As the real UFM documents them (REFERENCE-wave3 C; each behaviour pinned in tests/sim/test_ufm_jobs.py):

- the action answers **202** with `Location: /ufmRest/jobs/<id>` and no body; the job id is the last path
  segment (ufm_sdk_3.0 `batch_isolate_devices.py`, `snmp_receiver_plugin/snmp_server/helpers.py`);
- `GET /ufmRest/jobs/<id>` is one job object with `ID`, `Status`, `Progress`, `Description`, `Summary`,
  `RelatedObjects`, `Created`, `LastUpdated` ("%Y-%m-%d %H:%M:%S"), `CreatedBy`, `Operation`, `Foreground`;
  `<id>,<id>` a list; an id it does not know an empty list ("Jobs REST API", UFM Enterprise REST API Guide);
- `GET /ufmRest/jobs` lists them, filtered by `parent_id=<id>|null`, `status=`, `operation=`, `object_ids=`
  (same page); each parent job has one sub-job per object (`RelatedObjects[0]`, `Status`, `Summary`), as
  NVIDIA's `job_polling.py` and `helpers.py` read them;
- `Status` is `Running` (with `Progress` rising) until the job ends `Completed` (Progress 100) or `Completed
  With Errors` with what went wrong in `Summary` (`job_polling.py`'s statuses).

The port changes at the end of the job, so a client that reads it right after the 202 sees it unchanged.
Each job's duration and fate come from the site's ufm-faults.yml (`jobs:`, sim/ufm/faults.py): one that
fails ends `Completed With Errors` with the port unchanged; one that hangs stays `Running`; a kill ends the
caller (the process that POSTed the action) with SIGKILL, on the POST (`before`: no job) or once the port
changed and before the job says `Completed` (`after`). UNCONFIRMED
(no public capture): the type of `ID` (a string of digits here), `Operation`'s value (the action's name
here), whether `Location` is absolute (a path here; clients take the last segment either way).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabric.topology import End
from sim.ufm.faults import JobFault, JobPlan

RUNNING, COMPLETED, WITH_ERRORS = "Running", "Completed", "Completed With Errors"


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class SimJob:
    id: int
    operation: str
    description: str
    related: list[str]
    created_by: str
    parent: int | None = None
    duration_s: float = 1.0
    status: str = RUNNING
    summary: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)

    def progress(self) -> int:
        if self.status != RUNNING:
            return 100
        return min(95, int(100 * (time.time() - self.created) / max(self.duration_s, 0.001)))

    def finish(self, status: str, summary: str = "") -> None:
        self.status, self.summary, self.updated = status, summary, time.time()

    def to_rest(self) -> dict[str, Any]:
        return {"ID": str(self.id), "Status": self.status, "Progress": self.progress(),
                "Description": self.description, "Summary": self.summary, "RelatedObjects": list(self.related),
                "Created": _stamp(self.created), "LastUpdated": _stamp(self.updated), "CreatedBy": self.created_by,
                "Operation": self.operation, "Foreground": True}


class SimJobs:
    """Every job since the simulator started; `change(end, enabled)` is what a port action does to the fabric."""

    def __init__(self, plan: JobPlan, change: Callable[[End, bool], None]) -> None:
        self.plan = plan
        self.change = change
        self.jobs: dict[int, SimJob] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def _new(self, **kw: Any) -> SimJob:
        job = SimJob(len(self.jobs) + 1, **kw)
        self.jobs[job.id] = job
        return job

    def fate(self, end: End, action: str) -> JobFault | None:
        """The fault the next `action` on `end` meets (counted now, when the action is posted)."""
        return self.plan.fate(end, action)

    def start(self, end: End, action: str, description: str, user: str, fault: JobFault | None = None,
              kill: Callable[[], None] | None = None) -> SimJob:
        """A port action's job (and its one sub-job, for the port's system), running from now; `kill` ends the
        caller when a `kill` fault says so."""
        what = description or f"{action} port {end.guid}_{end.port}"
        job = self._new(operation=action, description=what, related=[end.guid], created_by=user)
        job.duration_s = self.plan.duration(job.id)
        sub = self._new(operation=action, description=f"{action} port {end.guid}_{end.port}",
                        related=[end.guid], created_by=user, parent=job.id, duration_s=job.duration_s)
        task = asyncio.create_task(self._run(job, sub, end, action, fault, kill))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return job

    async def _run(self, job: SimJob, sub: SimJob, end: End, action: str, fault: JobFault | None,
                   kill: Callable[[], None] | None) -> None:
        await asyncio.sleep(job.duration_s)
        if fault is not None and fault.fate == "hang":
            return  # Running for ever
        if fault is not None and fault.fate == "fail":
            status, summary = WITH_ERRORS, fault.summary
        else:
            try:
                await asyncio.to_thread(self.change, end, action == "enable")
                status, summary = COMPLETED, ""
            except Exception as e:  # the change failed in the fabric: the job says what went wrong
                status, summary = WITH_ERRORS, f"{action} {end.guid}_{end.port}: {type(e).__name__}: {e}"
            if fault is not None and fault.fate == "kill" and kill is not None:
                kill()  # the port changed; the caller dies before it can see the job end
        sub.finish(status, summary)
        job.finish(status, summary)

    def get(self, ids: str) -> Any:
        """`GET /ufmRest/jobs/<id>[,<id>]`: one object for one id, a list for several, [] for none known."""
        wanted = [int(i) for i in ids.split(",") if i.strip().isdigit()]
        found = [self.jobs[i].to_rest() for i in wanted if i in self.jobs]
        if len(wanted) == 1 and "," not in ids:
            return found[0] if found else []
        return found

    def listing(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """`GET /ufmRest/jobs[?parent_id=<id>|null][&status=][&operation=][&object_ids=a,b]`."""
        out = list(self.jobs.values())
        if "parent_id" in query:
            parent = query["parent_id"][0]
            out = [j for j in out if (j.parent is None if parent == "null" else str(j.parent) == parent)]
        if "status" in query:
            out = [j for j in out if j.status == query["status"][0]]
        if "operation" in query:
            out = [j for j in out if j.operation == query["operation"][0]]
        if "object_ids" in query:
            ids = set(query["object_ids"][0].split(","))
            out = [j for j in out if ids & set(j.related)]
        return [j.to_rest() for j in out]
