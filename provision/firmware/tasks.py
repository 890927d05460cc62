"""Following a Redfish task to its end, and waiting for a BMC that restarts after its own update.

DMTF Task (REFERENCE-wave3 B2): `TaskState` New, Starting, Running, Suspended, Interrupted, Pending, Stopping,
Completed, Killed, Exception, Service, Cancelling, Cancelled; done when Completed, Exception, Killed or
Cancelled. The monitor is the `Location` of the 202 (iDRAC: `/redfish/v1/TaskService/Tasks/JID_...`); one that
names another host or scheme than the BMC's own is never followed (a BMC must not send the controller, with
its session token, elsewhere). A task read fails with 503/unreachable while an iDRAC restarts: `wait_for_bmc`
polls the service root until it answers, within its deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from provision.firmware.multipart import multipart_body
from provision.redfish import (
    RedfishAuthError,
    RedfishClient,
    RedfishNotFound,
    RedfishRequestRejected,
    RedfishServerError,
    RedfishTimeout,
    RedfishUnreachable,
    RedfishUnsupported,
    Resource,
)
from provision.state.peer_text import shown
from provision.steps.runner import HostFailure

DONE = frozenset({"Completed", "Exception", "Killed", "Cancelled"})
GOOD = "Completed"
STAGED = "Scheduled"  # not a Redfish TaskState: an iDRAC's job staged for the next reboot (its task is not done)
AWAY = "BmcRestarting"  # not a Redfish TaskState: the BMC restarting after its own update ended our reads
_AWAY = (RedfishServerError, RedfishUnreachable, RedfishTimeout, RedfishAuthError)


@dataclass(frozen=True)
class TaskEnd:
    path: str
    state: str
    percent: int | None
    messages: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"task": self.path, "state": self.state, "percent": self.percent, "messages": list(self.messages)}


def monitor_path(location: str | None, body: Resource, endpoint: str) -> str:
    """The task to follow: the 202's Location (a path, or a URL on this BMC), else the Task in the body."""
    target = location or (body.data.get("@odata.id") if isinstance(body.data.get("@odata.id"), str) else None)
    if not target:
        raise HostFailure("firmware_update_refused", "the BMC accepted the update but named no task to follow",
                          {"answer": dict(body.data)})
    parts = urlsplit(target)
    if (parts.scheme or parts.netloc) and (parts.scheme != "https" or parts.netloc != endpoint):
        raise HostFailure("firmware_task_off_bmc", f"the BMC named a task monitor off itself: {shown(target, 200)} "
                          "(not followed)", {"location": shown(target, 200), "bmc": endpoint})
    if not parts.path.startswith("/redfish/"):
        raise HostFailure("firmware_task_off_bmc", f"task monitor {shown(target, 200)} is no Redfish path",
                          {"location": shown(target, 200)})
    return parts.path


def _dell_scheduled(task: dict[str, Any]) -> bool:
    """An iDRAC's task whose job waits for the host's reboot: `Oem.Dell.JobState` Scheduled or its `Message` "Task
    successfully scheduled." while TaskState is not done (dell/iDRAC-Redfish-Scripting
    DeviceFirmwareSimpleUpdateREDFISH.py: polls the task until Completed, or "scheduled" in Oem.Dell.Message, then
    reboots and follows the job under Managers/iDRAC.Embedded.1/Jobs)."""
    oem = task.get("Oem")
    dell = oem.get("Dell") if isinstance(oem, dict) else None
    if not isinstance(dell, dict):
        return False
    return dell.get("JobState") == STAGED or "scheduled" in str(dell.get("Message", "")).lower()


def _messages(data: Any) -> tuple[str, ...]:
    raw = data.get("Messages") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return ()
    return tuple(shown(str(m.get("Message", "")), 300) for m in raw[:8] if isinstance(m, dict))


def hpe_as_task(data: Any) -> dict[str, Any]:
    """An iLO's UpdateService, which stands for the task it does not name, read as a Task: `Oem.Hpe.State` (Idle,
    Uploading, Progressing, Updating, Verifying, Writing, Backingup, Complete, Error; `Result` on Error) and
    `FlashProgressPercent` (REFERENCE-wave3 B4, python-redfish-utility FirmwareUpdateCommand)."""
    oem = data.get("Oem") if isinstance(data, dict) else None
    hpe = oem.get("Hpe") if isinstance(oem, dict) else None
    hpe = hpe if isinstance(hpe, dict) else {}
    state = str(hpe.get("State", ""))
    result = hpe.get("Result")
    said = [{"Message": str(result.get("Message") or result.get("MessageId", ""))}] \
        if isinstance(result, dict) and result else []
    return {"TaskState": {"Complete": GOOD, "Error": "Exception"}.get(state, state),
            "PercentComplete": hpe.get("FlashProgressPercent"), "Messages": said}


async def follow(bmc: RedfishClient, path: str, *, timeout_s: float, poll_s: float, away_ends: bool = False,
                 clock: Callable[[], float] = time.monotonic, hpe: bool = False) -> TaskEnd:
    """Read the task until it is done; a BMC briefly away (503, reset connection) is read again, unless
    `away_ends` (the BMC's own update: it restarts when the update is done, ending the task as AWAY). Raises
    HostFailure firmware_task_timeout past the deadline (the task may still run on the BMC). `hpe`: `path` is an
    iLO's UpdateService, read as its task (hpe_as_task)."""
    deadline = clock() + timeout_s
    last: dict[str, Any] = {}
    while True:
        try:
            task = await bmc.get(path)
            last = hpe_as_task(task.data) if hpe else dict(task.data)
            state = str(last.get("TaskState", ""))
            if state not in DONE and _dell_scheduled(last):
                return TaskEnd(path, STAGED, None, _messages(last))
            if state in DONE:
                pct = last.get("PercentComplete")
                return TaskEnd(path, state, pct if isinstance(pct, int) else None, _messages(last))
        except _AWAY as exc:
            if away_ends:
                return TaskEnd(path, AWAY, None, (f"the BMC went away ({type(exc).__name__}) after "
                                                  f"{last.get('TaskState', 'an unread state')}",))
        if clock() >= deadline:
            raise HostFailure("firmware_task_timeout", f"task {path} not done after {timeout_s:g} s "
                              f"(last seen {last.get('TaskState', 'unread')}, {last.get('PercentComplete', '?')}%)",
                              {"task": path, "last": {k: last.get(k) for k in ("TaskState", "PercentComplete")}})
        await asyncio.sleep(poll_s)


async def wait_for_bmc(open_client: Callable[[], Any], *, timeout_s: float, poll_s: float,
                       clock: Callable[[], float] = time.monotonic) -> float:
    """After the BMC's own update: until a new session opens (the old one is gone), or bmc_did_not_return.
    `open_client` opens and closes one session (raising while the BMC is away); returns the seconds waited."""
    start = clock()
    while True:
        try:
            await open_client()
            return clock() - start
        except _AWAY:
            pass
        if clock() - start >= timeout_s:
            raise HostFailure("bmc_did_not_return", f"the BMC did not answer within {timeout_s:g} s of its own "
                              "update", {"waited_s": round(clock() - start, 1)})
        await asyncio.sleep(poll_s)


async def simple_update(bmc: RedfishClient, target: str, image_uri: str, *, timeout_s: float, poll_s: float,
                        own: bool = False, targets: tuple[str, ...] = (), hpe_service: str | None = None
                        ) -> TaskEnd:
    """POST SimpleUpdate `{"ImageURI", "TransferProtocol": "HTTP"}` (sushy's body; no Targets: the BMC matches the
    image to its component; `targets`: the FirmwareInventory URIs it goes to where the baseline names components),
    then follow the task it names to its end (an iLO names none: `hpe_service`, its UpdateService, is followed). A
    refusal (400, 405, 501) is one failure, never retried; a task that ends other than Completed fails
    firmware_update_failed with its messages. `own`: the BMC's own firmware, whose task may end with the BMC going
    away (AWAY: the caller waits for it to return)."""
    body: dict[str, Any] = {"ImageURI": image_uri, "TransferProtocol": "HTTP"}
    if targets:
        body["Targets"] = list(targets)
    return await _update(bmc, target, body, "SimpleUpdate", timeout_s=timeout_s, poll_s=poll_s, own=own,
                         hpe_service=hpe_service)


async def push_update(bmc: RedfishClient, target: str, filename: str, image: bytes, *, timeout_s: float,
                      poll_s: float, own: bool = False, targets: tuple[str, ...] = ()) -> TaskEnd:
    """The image itself POSTed to the BMC's MultipartHttpPushUri (multipart.py), then its task followed as
    SimpleUpdate's is; for BMCs that offer no SimpleUpdate. `targets`: UpdateParameters' Targets, the inventory
    URIs the image goes to (an HGX BMC updates only those: GPU VBIOS `HGX_FW_GPU_<n>`); empty: every component
    the image is for."""
    body = multipart_body({"Targets": list(targets), "@Redfish.OperationApplyTime": "Immediate"}, filename, image)
    return await _update(bmc, target, body, "the multipart push", timeout_s=timeout_s, poll_s=poll_s, own=own)


async def _update(bmc: RedfishClient, target: str, body: dict[str, Any] | tuple[str, bytes], what: str, *,
                  timeout_s: float, poll_s: float, own: bool, hpe_service: str | None = None) -> TaskEnd:
    try:
        answer, location = await bmc.post_located(target, body)
    except (RedfishRequestRejected, RedfishUnsupported, RedfishNotFound) as exc:
        raise HostFailure("firmware_update_refused", f"{what} refused: {exc}", exc.evidence()) from None
    if hpe_service is not None and location is None and "TaskState" not in answer.data:
        end = await follow(bmc, hpe_service, timeout_s=timeout_s, poll_s=poll_s, away_ends=own, hpe=True)
    else:
        end = await follow(bmc, monitor_path(location, answer, bmc.endpoint), timeout_s=timeout_s, poll_s=poll_s,
                           away_ends=own)
    if end.state not in (GOOD, AWAY, STAGED):
        raise HostFailure("firmware_update_failed", f"update task {end.state}: {'; '.join(end.messages)}",
                          end.as_json())
    return end
