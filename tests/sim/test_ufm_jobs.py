"""The UFM simulator's jobs and port resource, as NVIDIA documents them (REFERENCE-wave3 C), on ibsim.

Each test names the source of the behaviour it pins:
- Actions REST API (https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6112/actions+rest+api):
  `POST /ufmRest/actions` answers 202, `Location` holds `.../jobs/<id>`; NVIDIA's ufm_sdk_3.0
  `scripts/batch_isolate_devices/batch_isolate_devices.py` checks exactly that and takes the last segment;
- Jobs REST API (https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6120/jobs+rest+api): the
  job fields, `/jobs/<id>[,<id>]`, the filters, "an empty list will be returned" for an unknown id;
- ufm_sdk_3.0 `utils/job_polling.py`: `Running` until done, then `Completed` / `Completed With Errors`, the
  per-target sub-jobs of `jobs?parent_id=<id>`; `plugins/snmp_receiver_plugin/snmp_server/helpers.py`
  reads `RelatedObjects[0]`, `Status`, `Summary` of each sub-job;
- Ports REST API (https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6231/ports+rest+api):
  `systemID`, `peer`, `description`, `external_number`, `?system=<guid>`, `?active=true`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabric.topology import End
from fabric.ufm.client import UfmActuator
from fabric.ufm.errors import UfmJobFailed, UfmJobTimeout
from sim.ufm.faults import load_faults
from tests.fabric.conftest import SIM_DESIGN
from tests.fabric.ufmsim import UfmLab, ufm_sim_of

pytestmark = pytest.mark.tools("ibsim", "opensm")
PASSWORD = "s3cret-jobs"
LEAF = "0c42a10300000000"  # leaf-A-r3-U40
JOB_KEYS = {"ID", "Status", "Progress", "Description", "Summary", "RelatedObjects", "Created", "LastUpdated",
            "CreatedBy", "Operation", "Foreground"}
FAULTS = """jobs:
  duration_s: [0.4, 0.8]
  fail:
    - {node: leaf-A-r3-U40, port: 6, action: disable, times: 1, summary: "port 6: switch did not answer"}
  hang:
    - {node: leaf-A-r3-U40, port: 7, action: disable, times: 1}
"""


@pytest.fixture(scope="module")
def ufm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UfmLab]:
    tmp = tmp_path_factory.mktemp("ufmjobs")
    faults = tmp / "ufm-faults.yml"
    faults.write_text(FAULTS)
    with ufm_sim_of(faults, PASSWORD, tmp, poll_s=5) as lab:
        yield lab


def _http(ufm: UfmLab) -> httpx.Client:
    return httpx.Client(base_url=ufm.url, auth=("admin", ufm.password), verify=False, timeout=30)


def _action(http: httpx.Client, action: str, port: int) -> httpx.Response:
    return http.post("/ufmRest/actions", json={"params": {"port_id": f"{LEAF}_{port}"}, "action": action,
                                               "object_ids": [LEAF], "object_type": "System", "description": "",
                                               "identifier": "id"})


def _port(http: httpx.Client, port: int) -> dict[str, Any]:
    found = http.get(f"/ufmRest/resources/ports/{LEAF}_{port}").json()
    assert isinstance(found, list) and len(found) == 1
    return dict(found[0])


def _until_done(http: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        job = http.get(f"/ufmRest/jobs/{job_id}").json()
        if job["Status"] != "Running" or time.monotonic() > deadline:
            return dict(job)
        time.sleep(0.1)


def test_an_action_is_202_with_a_job_location_and_the_port_changes_only_when_its_job_completes(
        ufm: UfmLab) -> None:
    """Actions REST API + batch_isolate_devices.py (202, Location .../jobs/<id>); job_polling.py (Running,
    then Completed). Today's simulator changed the port before answering and had no /jobs: this fails there."""
    with _http(ufm) as http:
        answer = _action(http, "disable", 5)
        assert answer.status_code == 202 and answer.content == b""
        location = answer.headers["Location"]
        assert re.fullmatch(r"/ufmRest/jobs/\d+", location), location
        job_id = location.rsplit("/", 1)[1]
        running = http.get(f"/ufmRest/jobs/{job_id}").json()
        assert running["Status"] == "Running" and 0 <= running["Progress"] < 100
        assert _port(http, 5)["physical_state"] == "LinkUp"  # accepted, not done
        done = _until_done(http, job_id)
        assert (done["Status"], done["Progress"]) == ("Completed", 100)
        assert _port(http, 5)["physical_state"] == "Disabled"

    async def back() -> str:
        async with ufm.client(job_timeout_s=30) as c:
            note = await UfmActuator(c).set_enabled(End(LEAF, 5), True)
            assert note.startswith("UFM job ") and "Completed" in note
            return (await UfmActuator(c).status(End(LEAF, 5))).phys
    assert asyncio.run(back()) == "LinkUp"


def test_a_job_has_the_documented_fields_and_one_sub_job_per_object(ufm: UfmLab) -> None:
    """Jobs REST API (fields, filters parent_id / status / operation / object_ids); job_polling.py and
    helpers.py (sub-jobs of parent_id=<id>: RelatedObjects[0], Status, Summary)."""
    with _http(ufm) as http:
        job_id = _action(http, "disable", 8).headers["Location"].rsplit("/", 1)[1]
        job = _until_done(http, job_id)
        assert set(job) == JOB_KEYS and job["ID"] == job_id and job["RelatedObjects"] == [LEAF]
        assert job["Operation"] == "disable" and job["CreatedBy"] == "admin" and job["Foreground"] is True
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", job["Created"]) and job["LastUpdated"] >= job["Created"]
        subs = http.get("/ufmRest/jobs", params={"parent_id": job_id}).json()
        assert len(subs) == 1 and subs[0]["RelatedObjects"][0] == LEAF and subs[0]["Status"] == "Completed"
        parents = http.get("/ufmRest/jobs", params={"parent_id": "null"}).json()
        assert job_id in {j["ID"] for j in parents} and subs[0]["ID"] not in {j["ID"] for j in parents}
        everything = http.get("/ufmRest/jobs").json()
        assert {job_id, subs[0]["ID"]} <= {j["ID"] for j in everything}
        assert all(j["Status"] == "Completed" for j in http.get("/ufmRest/jobs", params={"status": "Completed"}).json())
        assert all(j["Operation"] == "disable" for j in http.get("/ufmRest/jobs", params={"operation": "disable"}).json())
        assert http.get("/ufmRest/jobs", params={"object_ids": "0c42a103000000ff"}).json() == []
        _until_done(http, _action(http, "enable", 8).headers["Location"].rsplit("/", 1)[1])


def test_an_unknown_job_is_an_empty_list_and_several_ids_a_list(ufm: UfmLab) -> None:
    """Jobs REST API: `/jobs/<id>,<id>`; "If an invalid or non-existing ... job ID were specified, an empty
    list will be returned"."""
    with _http(ufm) as http:
        assert http.get("/ufmRest/jobs/999999").json() == []
        job_id = _action(http, "disable", 9).headers["Location"].rsplit("/", 1)[1]
        both = http.get(f"/ufmRest/jobs/{job_id},999999").json()
        assert isinstance(both, list) and [j["ID"] for j in both] == [job_id]
        _until_done(http, job_id)
        _until_done(http, _action(http, "enable", 9).headers["Location"].rsplit("/", 1)[1])


def test_a_job_the_faults_fail_ends_completed_with_errors_and_leaves_the_port(ufm: UfmLab) -> None:
    """helpers.py / job_polling.py: `Completed With Errors`, the error in Summary (the job's and its
    sub-job's); ufm-faults.yml `jobs.fail` with `times: 1`: the next job on that port completes."""
    async def go() -> tuple[str, str, str]:
        async with ufm.client(job_timeout_s=30) as c:
            actuator = UfmActuator(c)
            with pytest.raises(UfmJobFailed) as failed:
                await actuator.set_enabled(End(LEAF, 6), False)
            still = (await actuator.status(End(LEAF, 6))).phys
            await actuator.set_enabled(End(LEAF, 6), False)
            off = (await actuator.status(End(LEAF, 6))).phys
            await actuator.set_enabled(End(LEAF, 6), True)
            return str(failed.value), still, off
    message, still, off = asyncio.run(go())
    assert "Completed With Errors: port 6: switch did not answer" in message and f"disable {LEAF}_6" in message
    assert (still, off) == ("LinkUp", "Disabled")


def test_a_job_the_faults_hang_stays_running_and_the_clients_deadline_fires(ufm: UfmLab) -> None:
    """job_polling.py polls while `Running`: a job that never ends is still Running at the client's deadline
    (ufm-faults.yml `jobs.hang`); the port is unchanged."""
    async def go() -> tuple[str, float, str]:
        async with ufm.client(job_timeout_s=1.5) as c:
            started = time.monotonic()
            with pytest.raises(UfmJobTimeout) as late:
                await UfmActuator(c).set_enabled(End(LEAF, 7), False)
            took = time.monotonic() - started
            return str(late.value), took, (await UfmActuator(c).status(End(LEAF, 7))).phys
    message, took, phys = asyncio.run(go())
    assert "Running" in message and "after 1.5 s" in message and 1.5 <= took < 4 and phys == "LinkUp"
    job_id = re.search(r"UFM job (\d+) Running", message)
    assert job_id is not None
    with _http(ufm) as http:
        assert http.get(f"/ufmRest/jobs/{job_id.group(1)}").json()["Status"] == "Running"
        assert job_id.group(1) in {j["ID"] for j in http.get("/ufmRest/jobs", params={"status": "Running"}).json()}


def test_ports_have_the_documented_fields_filters_and_a_plain_json_type(ufm: UfmLab) -> None:
    """Ports REST API: `systemID` (the owning system's GUID, what actions name), `peer`, `description`
    ("Switch IB Port" / "Computer IB Port"), `external_number`; `?system=<guid>` and `?active=true`."""
    with _http(ufm) as http:
        answer = http.get("/ufmRest/resources/ports")
        assert answer.headers["Content-Type"] == "application/json" and "OData-Version" not in answer.headers
        ports = answer.json()
        leaf1 = next(p for p in ports if p["name"] == f"{LEAF}_1")
        assert leaf1["systemID"] == LEAF and leaf1["external_number"] == 1
        assert leaf1["description"] == "Switch IB Port" and re.fullmatch(r"[0-9a-f]{16}_\d+", leaf1["peer"])
        peer = next(p for p in ports if p["name"] == leaf1["peer"])
        assert peer["peer"] == leaf1["name"]
        assert {p["description"] for p in ports} == {"Switch IB Port", "Computer IB Port"}
        mine = http.get("/ufmRest/resources/ports", params={"system": LEAF}).json()
        assert mine and {p["systemID"] for p in mine} == {LEAF}
        _until_done(http, _action(http, "disable", 10).headers["Location"].rsplit("/", 1)[1])
        active = http.get("/ufmRest/resources/ports", params={"system": LEAF, "active": "true"}).json()
        assert {p["logical_state"] for p in active} == {"Active"} and f"{LEAF}_10" not in {p["name"] for p in active}
        assert f"{LEAF}_10" in {p["name"] for p in mine}
        _until_done(http, _action(http, "enable", 10).headers["Location"].rsplit("/", 1)[1])


def test_job_durations_and_fates_come_from_the_faults_file(tmp_path: Path) -> None:
    """sim/ufm/faults.py `jobs:`: each job its own duration within the range, the same on every run; a fault
    with `times: 1` meets one job."""
    faults = tmp_path / "ufm-faults.yml"
    faults.write_text(FAULTS.replace("[0.4, 0.8]", "[1, 5]"))
    plan = load_faults(faults, None, SIM_DESIGN).jobs
    durations = [plan.duration(i) for i in range(1, 41)]
    assert all(1 <= d <= 5 for d in durations) and max(durations) - min(durations) > 2
    assert durations == [load_faults(faults, None, SIM_DESIGN).jobs.duration(i) for i in range(1, 41)]
    first = plan.fate(End(LEAF, 6), "disable")
    assert first is not None and first.fate == "fail" and plan.fate(End(LEAF, 6), "disable") is None
    assert plan.fate(End(LEAF, 7), "enable") is None
