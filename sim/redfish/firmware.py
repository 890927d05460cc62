"""UpdateService, FirmwareInventory, TaskService and Bios/Settings of one simulated iDRAC.

Shapes and behaviour (REFERENCE-wave3 B1-B4): SimpleUpdate `{"ImageURI", "TransferProtocol"?, "Targets"?}`
answers 202 with `Location: /redfish/v1/TaskService/Tasks/JID_<n>` (iDRAC job ids) and the Task as body; the task
goes New -> Running (PercentComplete) -> Completed or Exception, its `Messages` saying why; the image is fetched
from ImageURI (loopback only here) while the task runs. Host firmware (BIOS, NIC, HCA, GPU, PSU, CPLD) is staged
and installed at the next host reboot, as an iDRAC schedules such jobs; the iDRAC's own firmware installs at
once and the iDRAC restarts: every request answers 503 meanwhile and the sessions are gone (401 after), as
Dell's scripts handle it. Bios carries `@Redfish.Settings` with the R650's SupportedApplyTimes (OnReset,
AtMaintenanceWindowStart, InMaintenanceWindowOnReset: no Immediate); PATCH Bios/Settings `{"Attributes": {...},
"@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}` keeps them pending until the next reboot, an unknown
attribute is 400 PropertyUnknown. Firmware faults: firmware_config.py.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from sim.addresses import check_loopback
from sim.redfish import tree
from sim.redfish.firmware_config import FirmwareFault, HostFirmwareConfig, SimComponent, image_target
from sim.redfish.firmware_push import parse_push
from sim.redfish.http import Request, Response
from sim.redfish.identity import ServerIdentity
from sim.redfish.messages import info, message


class SimBmc(Protocol):
    """What this module uses of a simulated BMC (bmc.py's SimBmc; a Protocol, so bmc.py can import this module)."""

    ident: ServerIdentity
    sessions: Any  # its SessionTable: cleared when the iDRAC restarts
    _tree: dict[str, Any]

    def _authorized(self, req: Request) -> bool: ...

    def rebuild(self) -> None: ...


UPDATE = f"{tree.V1}/UpdateService"
INVENTORY = f"{UPDATE}/FirmwareInventory"
SIMPLE_UPDATE = f"{UPDATE}/Actions/UpdateService.SimpleUpdate"
PUSH = f"{UPDATE}/MultipartUpload"  # the iDRAC's MultipartHttpPushUri
TASKS = f"{tree.V1}/TaskService/Tasks"
BIOS = f"{tree.SYSTEM}/Bios"
BIOS_SETTINGS = f"{BIOS}/Settings"
APPLY_TIMES = ["OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"]
MAX_IMAGE = 64 * 1024 * 1024
_JOB_IDS = itertools.count(1)


@dataclass
class SimTask:
    id: str
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
            "Messages": list(self.messages), "StartTime": stamp, "TaskMonitor": f"{TASKS}/{self.id}",
            "Oem": {"Dell": {"JobState": {"Completed": "Completed", "Exception": "Failed"}.get(self.state, "Running"),
                             "JobType": "FirmwareUpdate", "PercentComplete": self.percent}}}
        if self.end is not None:
            out["EndTime"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(self.end))
        return out


@dataclass
class SimFirmware:
    config: HostFirmwareConfig
    task_s: float = 1.0  # how long an update task runs
    bmc_reboot_s: float = 1.0  # how long the iDRAC is away after its own update
    components: dict[str, SimComponent] = field(default_factory=dict)
    bios: dict[str, Any] = field(default_factory=dict)
    pending: dict[str, Any] = field(default_factory=dict)
    staged: dict[str, str] = field(default_factory=dict)  # fqdd -> version installed at the next reboot
    tasks: dict[str, SimTask] = field(default_factory=dict)
    gone_until: float = 0.0
    updates: list[str] = field(default_factory=list)  # ImageURIs SimpleUpdate was given
    _running: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.components = {c.fqdd: replace(c) for c in self.config.components}
        self.bios = dict(self.config.bios)

    @property
    def faults(self) -> frozenset[FirmwareFault]:
        return self.config.faults

    # resources -----------------------------------------------------------------------------------

    def resource(self, bmc: SimBmc, path: str) -> dict[str, Any] | None:
        if path == UPDATE:
            actions = {} if FirmwareFault.no_simple_update in self.faults else {"#UpdateService.SimpleUpdate": {
                "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"], "target": SIMPLE_UPDATE}}
            return {"@odata.id": UPDATE, "@odata.type": "#UpdateService.v1_11_0.UpdateService", "Id": "UpdateService",
                    "Name": "Update Service", "ServiceEnabled": True, "FirmwareInventory": tree.ref(INVENTORY),
                    "MultipartHttpPushUri": PUSH, "Actions": actions}
        if path == INVENTORY:
            return tree.collection(INVENTORY, "SoftwareInventory", "Firmware Inventory Collection",
                                   [f"{INVENTORY}/{c.rid}" for c in self.components.values()])
        if path.startswith(INVENTORY + "/"):
            rid = path.rsplit("/", 1)[1]
            comp = next((c for c in self.components.values() if c.rid == rid), None)
            return None if comp is None else {
                "@odata.id": path, "@odata.type": "#SoftwareInventory.v1_5_0.SoftwareInventory", "Id": rid,
                "Name": comp.name, "Version": comp.version, "Updateable": comp.updateable,
                "Status": {"Health": "OK", "State": "Enabled"}, "SoftwareId": rid.split("-")[1]}
        if path == f"{tree.V1}/TaskService":
            return {"@odata.id": path, "@odata.type": "#TaskService.v1_1_4.TaskService", "Id": "TaskService",
                    "Name": "Task Service", "ServiceEnabled": True, "Tasks": tree.ref(TASKS)}
        if path == TASKS:
            return tree.collection(TASKS, "Task", "Task Collection", [f"{TASKS}/{t}" for t in self.tasks])
        if path.startswith(TASKS + "/"):
            task = self.tasks.get(path.rsplit("/", 1)[1])
            return None if task is None else task.resource()
        if path == BIOS:
            return self._bios(bmc)
        if path == BIOS_SETTINGS:
            return {"@odata.id": BIOS_SETTINGS, "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Settings",
                    "Name": "BIOS Configuration Pending Settings", "Attributes": dict(self.pending)}
        return None

    def _bios(self, bmc: SimBmc) -> dict[str, Any]:
        static = bmc._tree.get(BIOS) or {}
        attrs = {**(static.get("Attributes") or {}), **self.bios}
        attrs["SystemBiosVersion"] = self.components["BIOS.Setup.1-1"].version
        return {**static, "Attributes": attrs, "@Redfish.Settings": {
            "@odata.type": "#Settings.v1_3_5.Settings", "SettingsObject": tree.ref(BIOS_SETTINGS),
            "SupportedApplyTimes": APPLY_TIMES}}

    # requests ------------------------------------------------------------------------------------

    async def handle(self, bmc: SimBmc, req: Request) -> Response | None:
        """The answer to a request this module serves, else None (bmc.py answers it)."""
        if time.monotonic() < self.gone_until:
            return message(503, "The iDRAC is restarting after a firmware update.", "ServiceTemporarilyUnavailable",
                           "Retry the operation after some time.", {"Retry-After": "5"})
        path = req.path.rstrip("/") or "/"
        if path == tree.V1 and req.method == "GET":
            root = tree.service_root(bmc.ident.uuid)
            return Response.of(200, {**root, "UpdateService": tree.ref(UPDATE),
                                     "Tasks": tree.ref(f"{tree.V1}/TaskService")})  # ServiceRoot names it Tasks
        found = self.resource(bmc, path)
        if found is None and path not in (SIMPLE_UPDATE, PUSH):
            return None
        if not bmc._authorized(req):
            return message(401, "The authentication credentials included with this request are missing or invalid.",
                           "NoValidSession", "Log in with valid credentials and retry.")
        if req.method == "GET" and path.startswith(TASKS + "/") and found is not None:
            # A running task answers 202 (DSP0266 task monitor; sushy's TaskMonitor polls until it is not 202).
            return Response.of(200 if found["TaskState"] in ("Completed", "Exception") else 202, found)
        if req.method == "GET" and found is not None:
            if path == INVENTORY and "$expand" in unquote(req.query):  # members inline, as an iDRAC does
                found = {**found, "Members": [self.resource(bmc, m["@odata.id"]) for m in found["Members"]]}
            return Response.of(200, found)
        if req.method == "POST" and path == SIMPLE_UPDATE and FirmwareFault.no_simple_update not in self.faults:
            return self._simple_update(bmc, req)
        if req.method == "POST" and path == PUSH:
            pushed = parse_push(req.headers.get("content-type", ""), req.body)
            if isinstance(pushed, str):
                return message(400, pushed, "MalformedJSON")
            return self._start(bmc, "MultipartUpload", pushed[1])
        if req.method == "PATCH" and path == BIOS_SETTINGS:
            return self._patch_bios(req)
        return message(405, f"The operation {req.method} is not allowed on {path}.", "OperationNotAllowed")

    def _simple_update(self, bmc: SimBmc, req: Request) -> Response:
        try:
            body = req.json()
        except ValueError:
            return message(400, "The request body submitted was malformed JSON.", "MalformedJSON")
        uri = body.get("ImageURI") if isinstance(body, dict) else None
        proto = body.get("TransferProtocol", "HTTP") if isinstance(body, dict) else None
        if not isinstance(uri, str) or not uri:
            return message(400, "The action SimpleUpdate requires the parameter ImageURI.",
                           "ActionParameterValueNotInList")
        if proto not in ("HTTP", "HTTPS") or FirmwareFault.update_refused in self.faults:
            return message(400, f"The value {proto} for the parameter TransferProtocol is not in the list of "
                           "acceptable values.", "ActionParameterValueNotInList")
        return self._start(bmc, uri, None)

    def _start(self, bmc: SimBmc, source: str, content: bytes | None) -> Response:
        """A firmware job for an image fetched from `source` (SimpleUpdate's ImageURI) or pushed (`content`)."""
        self.updates.append(source)
        task = SimTask(f"JID_{int(time.time()) % 1000000:06d}{next(_JOB_IDS):06d}")
        self.tasks[task.id] = task
        job = asyncio.create_task(self._run(bmc, task, source, content))
        self._running.add(job)
        job.add_done_callback(self._running.discard)
        where = f"{TASKS}/{task.id}"
        if FirmwareFault.task_off_bmc in self.faults:
            where = f"https://198.51.100.7{where}"
        return Response.of(202, task.resource(), {"Location": where})

    async def _run(self, bmc: SimBmc, task: SimTask, uri: str, pushed: bytes | None) -> None:
        task.state = "Running"
        task.percent = 10
        try:
            content = pushed if pushed is not None else await fetch_image(uri)
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            return self._end(task, "Exception", f"Unable to transfer the image from {uri}: {exc}")
        target = image_target(content)
        comp = None if target is None else next((c for c in self.components.values() if c.kind == target[0]), None)
        if target is None or comp is None:
            return self._end(task, "Exception", "The update package is not applicable to this system.")
        await asyncio.sleep(self.task_s / 2)
        task.percent = 50
        if FirmwareFault.task_hangs in self.faults:
            return  # Running at 50% for ever
        if FirmwareFault.update_fails in self.faults:
            return self._end(task, "Exception", "Unable to complete the firmware update: flash write failed.")
        await asyncio.sleep(self.task_s / 2)
        if target[0] == "bmc":
            self._install(bmc, "bmc", target[1])
            self._end(task, "Completed", "The iDRAC firmware was updated; the iDRAC restarts.")
            reboot = 60.0 if FirmwareFault.bmc_gone_long in self.faults else self.bmc_reboot_s
            self.gone_until = time.monotonic() + reboot
            bmc.sessions.clear()
            return None
        for c in self.components.values():
            if c.kind == target[0]:
                self.staged[c.fqdd] = target[1]
        return self._end(task, "Completed", "Job completed successfully; the update is applied at the next reboot.")

    def _end(self, task: SimTask, state: str, text: str) -> None:
        task.state = state
        task.percent = 100 if state == "Completed" else task.percent
        task.end = time.time()
        task.messages.append(info("Success" if state == "Completed" else "GeneralError", text))

    def _install(self, bmc: SimBmc, kind: str, version: str) -> None:
        for c in self.components.values():
            if c.kind == kind:
                c.version = version
        if kind == "bios":
            bmc.ident = replace(bmc.ident, bios_version=version)
        elif kind == "bmc":
            bmc.ident = replace(bmc.ident, bmc_firmware=version)
        bmc.rebuild()

    def _patch_bios(self, req: Request) -> Response:
        try:
            body = req.json()
        except ValueError:
            return message(400, "The request body submitted was malformed JSON.", "MalformedJSON")
        attrs = body.get("Attributes") if isinstance(body, dict) else None
        if not isinstance(attrs, dict) or not attrs:
            return message(400, "The request body must carry Attributes.", "PropertyUnknown")
        when = body.get("@Redfish.SettingsApplyTime", {}).get("ApplyTime", "OnReset")
        if when not in APPLY_TIMES:
            return message(400, f"The value {when} for the property ApplyTime is not in the list of acceptable "
                           "values.", "PropertyValueNotInList")
        for name, value in attrs.items():
            if name not in self.bios and name not in ("SysProfile", "BootMode"):
                return message(400, f"The property {name} is not in the list of valid properties for the resource.",
                               "PropertyUnknown")
            if FirmwareFault.setting_refused in self.faults:
                return message(400, f"The value {value} for the property {name} is not in the list of acceptable "
                               "values.", "PropertyValueNotInList")
        self.pending.update(attrs)
        return Response.of(202, {"@Message.ExtendedInfo": [info("Success", "Successfully Completed Request")]},
                           {"Location": f"{TASKS}/JID_BIOS{next(_JOB_IDS):06d}"})

    def booted(self, bmc: SimBmc) -> None:
        """The host rebooted: staged firmware installs, pending BIOS attributes apply (unless a fault drops them)."""
        staged, self.staged = self.staged, {}
        if FirmwareFault.version_unchanged not in self.faults:
            for fqdd, version in staged.items():
                self._install(bmc, self.components[fqdd].kind, version)
        pending, self.pending = self.pending, {}
        if FirmwareFault.bios_not_applied not in self.faults:
            self.bios.update(pending)

    def snapshot(self) -> dict[str, Any]:
        return {"versions": {c.fqdd: c.version for c in self.components.values()}, "bios": dict(self.bios),
                "pending": dict(self.pending), "staged": dict(self.staged), "updates": list(self.updates),
                "tasks": {t.id: t.state for t in self.tasks.values()}}


async def fetch_image(uri: str) -> bytes:
    """GET an image over plain HTTP from a loopback address (the lab never fetches from elsewhere)."""
    parts = urlsplit(uri)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"only http:// images in the lab, not {parts.scheme}://")
    check_loopback(parts.hostname)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 80), 10)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise ValueError(f"HTTP {status}")
        chunks: list[bytes] = []
        size = 0
        async with asyncio.timeout(30):
            while chunk := await reader.read(1 << 16):
                size += len(chunk)
                if size > MAX_IMAGE:
                    raise ValueError("image larger than the iDRAC accepts")
                chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()


def attach(bmcs: Mapping[str, Any], configs: dict[str, HostFirmwareConfig]) -> None:
    """Every simulated BMC (bmc.py's SimBmc) gets its firmware state."""
    for name, bmc in bmcs.items():
        bmc.firmware = SimFirmware(configs[name])
