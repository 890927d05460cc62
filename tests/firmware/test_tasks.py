"""SimpleUpdate and its task against scripted BMC answers (httpx.MockTransport): each refusal is one request and a
clear reason, a task monitor off the BMC is never followed, a failed or hung task fails its host.
Task states from DMTF Task.v1_7 (REFERENCE-wave3 B2); the 202 + Location pattern from DSP0266 and Dell's scripts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from provision.firmware.tasks import monitor_path, simple_update
from provision.redfish import ClientOptions, RedfishClient, Resource
from provision.steps.runner import HostFailure

TARGET = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
TASK = "/redfish/v1/TaskService/Tasks/JID_1"
OPTIONS = ClientOptions(timeout_s=2.0, retries=2, backoff_s=0.01, backoff_max_s=0.02, auth="basic")


def bmc(answers: Callable[[httpx.Request], httpx.Response], seen: list[str]) -> RedfishClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return answers(request)
    return RedfishClient("https://bmc.test", None, options=OPTIONS, transport=httpx.MockTransport(handler))


def update(answers: Callable[[httpx.Request], httpx.Response], seen: list[str], timeout_s: float = 2.0) -> Any:
    return asyncio.run(simple_update(bmc(answers, seen), TARGET, "http://ctl/fw.bin", timeout_s=timeout_s,
                                     poll_s=0.01))


def error(status: int) -> httpx.Response:
    return httpx.Response(status, json={"error": {"@Message.ExtendedInfo": [{"Message": f"no ({status})"}]}})


@pytest.mark.parametrize("status", [400, 405, 501])
def test_a_refused_simple_update_is_one_request_and_firmware_update_refused(status: int) -> None:
    seen: list[str] = []
    with pytest.raises(HostFailure) as failed:
        update(lambda r: error(status), seen)
    assert failed.value.reason == "firmware_update_refused" and seen == [f"POST {TARGET}"]


def test_a_task_monitor_on_another_host_or_scheme_is_never_followed() -> None:
    for where in ("https://198.51.100.7/redfish/v1/TaskService/Tasks/1", "http://bmc.test/redfish/v1/TaskService/1",
                  "/cgi-bin/task"):
        seen: list[str] = []

        def answer(r: httpx.Request, w: str = where) -> httpx.Response:
            return httpx.Response(202, headers={"Location": w})
        with pytest.raises(HostFailure) as failed:
            update(answer, seen)
        assert failed.value.reason == "firmware_task_off_bmc" and seen == [f"POST {TARGET}"], where
    assert monitor_path(f"https://bmc.test{TASK}", Resource(TARGET, {}), "bmc.test") == TASK
    assert monitor_path(None, Resource(TARGET, {"@odata.id": TASK}), "bmc.test") == TASK  # the Task in the body


def test_the_task_is_followed_to_its_end_and_an_exception_fails_with_its_messages() -> None:
    states = iter(["Running", "Running", "Exception"])

    def answers(r: httpx.Request) -> httpx.Response:
        if r.method == "POST":
            return httpx.Response(202, headers={"Location": TASK})
        state = next(states)
        messages = [{"Message": "flash write failed"}] if state == "Exception" else []
        return httpx.Response(200 if state == "Exception" else 202, json={"TaskState": state, "Messages": messages})
    seen: list[str] = []
    with pytest.raises(HostFailure) as failed:
        update(answers, seen)
    assert failed.value.reason == "firmware_update_failed" and "flash write failed" in failed.value.detail
    assert seen.count(f"GET {TASK}") == 3


def test_a_task_that_never_ends_times_out_and_a_completed_one_passes() -> None:
    def hung(r: httpx.Request) -> httpx.Response:
        return httpx.Response(202, headers={"Location": TASK}, json={"TaskState": "Running", "PercentComplete": 50})
    with pytest.raises(HostFailure) as failed:
        update(hung, [], timeout_s=0.1)
    assert failed.value.reason == "firmware_task_timeout" and failed.value.evidence["last"]["PercentComplete"] == 50

    def done(r: httpx.Request) -> httpx.Response:
        if r.method == "POST":
            return httpx.Response(202, headers={"Location": TASK})
        return httpx.Response(200, json={"TaskState": "Completed", "PercentComplete": 100})
    assert update(done, []).state == "Completed"


def test_a_multipart_push_carries_the_parameters_and_the_image_as_dmtf_describes() -> None:
    from provision.firmware.multipart import multipart_body
    from sim.redfish.firmware_push import parse_push

    image = b"\x00\x01firmware\r\n--not-a-boundary\r\n"
    ctype, body = multipart_body({"Targets": [], "@Redfish.OperationApplyTime": "Immediate"}, "fw 1.bin", image)
    assert ctype.startswith("multipart/form-data; boundary=bringup-")
    assert b'name="UpdateFile"; filename="fw1.bin"' in body and b"Content-Type: application/json" in body
    parsed = parse_push(ctype, body)
    assert parsed == ({"Targets": [], "@Redfish.OperationApplyTime": "Immediate"}, image)
    assert parse_push("application/json", body) == "the request is not multipart/form-data with a boundary"


def test_an_idrac_task_whose_job_is_scheduled_for_the_reboot_ends_the_wait_as_staged() -> None:
    """A real iDRAC's task for host firmware does not reach Completed before the reboot that installs it: its
    Oem.Dell says the job is scheduled (dell/iDRAC-Redfish-Scripting DeviceFirmwareSimpleUpdateREDFISH.py waits for
    TaskState Completed or "scheduled" in Oem.Dell.Message, then reboots)."""
    reads = iter([{"TaskState": "Running", "PercentComplete": 40, "Oem": {"Dell": {"JobState": "Downloading",
                                                                                  "Message": "Downloading."}}},
                  {"TaskState": "Running", "PercentComplete": 100,
                   "Oem": {"Dell": {"JobState": "Scheduled", "Message": "Task successfully scheduled."}},
                   "Messages": [{"Message": "Task successfully scheduled."}]}])

    def answer(r: httpx.Request) -> httpx.Response:
        if r.method == "POST":
            return httpx.Response(202, headers={"Location": TASK})
        return httpx.Response(202, json={"@odata.id": TASK, **next(reads)})
    seen: list[str] = []
    end = update(answer, seen)
    assert (end.state, end.messages) == ("Scheduled", ("Task successfully scheduled.",))
    assert seen == [f"POST {TARGET}", f"GET {TASK}", f"GET {TASK}"]
