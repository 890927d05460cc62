"""UFM jobs: what `POST /ufmRest/actions` starts, as UFM reports it.

The documented shapes (REFERENCE-wave3 C):

- `POST /ufmRest/actions` answers **202** with a `Location` header `.../jobs/<id>`; the job id is its last
  path segment (NVIDIA's ufm_sdk_3.0 `scripts/batch_isolate_devices/batch_isolate_devices.py`
  `mark_switches_as_unhealthy()`, `plugins/snmp_receiver_plugin/snmp_server/helpers.py` `_extract_job_id()`).
- `GET /ufmRest/jobs/<id>` is one job object: `ID`, `Status`, `Progress`, `Description`, `Summary`,
  `RelatedObjects`, `Created`, `LastUpdated`, `CreatedBy`, `Operation`, `Foreground` (UFM Enterprise REST API
  Guide, "Jobs REST API", https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6120/jobs+rest+api);
  an id UFM does not know answers an empty list (same page: "an empty list will be returned").
- `Status` is `Running` until the job ends, then `Completed`, `Completed With Errors` or `Completed With
  Warnings`: NVIDIA's `utils/job_polling.py` `start_polling()` polls while `Running`; per-target outcomes are
  sub-jobs, `GET /ufmRest/jobs?parent_id=<id>`, each with `RelatedObjects[0]`, `Status` and `Summary`
  (`job_polling.py` `print_sub_jobs_summary()`, `helpers.py` `get_provisioning_output()`).

Anything else that is not `Running` is an end that did not complete (an `Aborted` job included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fabric.ufm.errors import UfmProtocolError

RUNNING = "Running"
COMPLETED = "Completed"
COMPLETED_WITH_WARNINGS = "Completed With Warnings"
COMPLETED_WITH_ERRORS = "Completed With Errors"
MAX_SUMMARY = 300  # characters of a job's Summary kept in a message or the ledger
_JOB_ID = re.compile(r"^[0-9A-Za-z._-]{1,64}$")


@dataclass(frozen=True)
class UfmJob:
    id: str
    status: str
    progress: int | None = None
    summary: str = ""
    related: tuple[str, ...] = ()
    description: str = ""
    operation: str = ""

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    @property
    def succeeded(self) -> bool:
        return self.status in (COMPLETED, COMPLETED_WITH_WARNINGS)

    def describe(self) -> str:
        progress = f", Progress {self.progress}%" if self.progress is not None and self.running else ""
        summary = f": {self.summary}" if self.summary else ""
        return f"UFM job {self.id} {self.status}{progress}{summary}"


def job_id_from_location(location: str, what: str) -> str:
    """The job id of a 202's `Location` (`/ufmRest/jobs/12` or `https://ufm/ufmRest/jobs/12`)."""
    path = location.split("?", 1)[0].rstrip("/")
    head, _, job_id = path.rpartition("/")
    if not head.endswith("/jobs") or not _JOB_ID.match(job_id):
        raise UfmProtocolError(f"{what}: UFM's Location {location[:120]!r} names no job (expected .../jobs/<id>)")
    return job_id


def _text(raw: Any) -> str:
    return " ".join(str(raw).split())[:MAX_SUMMARY] if raw not in (None, "") else ""


def job_from(obj: Any, what: str) -> UfmJob:
    """One job object of UFM's answer; a job without `ID` or `Status` is not what UFM sends."""
    if not isinstance(obj, dict) or obj.get("ID") in (None, "") or not isinstance(obj.get("Status"), str):
        raise UfmProtocolError(f"{what}: expected a job object with ID and Status, got {str(obj)[:120]!r}")
    progress = obj.get("Progress")
    related = obj.get("RelatedObjects")
    return UfmJob(str(obj["ID"]), obj["Status"].strip(),
                  int(progress) if isinstance(progress, int | float) and not isinstance(progress, bool) else None,
                  _text(obj.get("Summary")), tuple(str(r) for r in related) if isinstance(related, list) else (),
                  _text(obj.get("Description")), _text(obj.get("Operation")))


def one_job(data: Any, job_id: str, what: str) -> UfmJob | None:
    """`GET /ufmRest/jobs/<id>`: the job, or None when UFM does not know it (an empty list)."""
    if isinstance(data, list):
        if not data:
            return None
        found = [job_from(o, what) for o in data]
        data_job = next((j for j in found if j.id == job_id), None)
        if data_job is None:
            raise UfmProtocolError(f"{what}: UFM answered jobs {[j.id for j in found][:5]}, not job {job_id}")
        return data_job
    job = job_from(data, what)
    if job.id != job_id:
        raise UfmProtocolError(f"{what}: UFM answered job {job.id}, not job {job_id}")
    return job


def job_list(data: Any, what: str) -> list[UfmJob]:
    """`GET /ufmRest/jobs?...`: a list of job objects."""
    if not isinstance(data, list):
        raise UfmProtocolError(f"{what}: expected a JSON list of jobs")
    return [job_from(o, what) for o in data]
