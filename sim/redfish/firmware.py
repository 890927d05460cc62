"""UpdateService, FirmwareInventory, TaskService and Bios/Settings of one simulated BMC, in its flavour's shape
(firmware_flavours.py: Dell iDRAC by default, HPE iLO, NVIDIA HGX).

Shapes and behaviour (REFERENCE-wave3 B1-B4): SimpleUpdate `{"ImageURI", "TransferProtocol"?, "Targets"?}`
answers 202 with `Location: /redfish/v1/TaskService/Tasks/<id>` (an iLO: 200 and no task, its UpdateService's
`Oem.Hpe.State` tells the progress) and the Task as body; the task goes New -> Running (PercentComplete) ->
Completed or Exception, its `Messages` saying why; the image is fetched from ImageURI (loopback only here) while
the task runs. A multipart push (iDRAC, HGX) carries the image itself; its `Targets` (FirmwareInventory URIs)
limit the components it goes to, as on HGX. Host firmware (BIOS, NIC, HCA, GPU, PSU, CPLD, baseboard) is staged
and installed at the next host reboot, as an iDRAC schedules such jobs (its job queue: firmware_jobs.py); the
BMC's own firmware installs at once and the BMC restarts: every request answers 503 meanwhile and the sessions
are gone (401 after), as Dell's scripts handle it. Bios carries `@Redfish.Settings` with the flavour's
SupportedApplyTimes; a PATCH to its SettingsObject applies as firmware_bios.py says (OnReset: pending until the
next reboot); an unknown attribute is 400 PropertyUnknown. Firmware faults: firmware_config.py.
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
from sim.redfish.firmware_bios import ApplyRule, apply_rule, schedule
from sim.redfish.firmware_config import FirmwareFault, HostFirmwareConfig, image_target
from sim.redfish.firmware_flavours import (
    BIOS,
    INVENTORY,
    SHAPES,
    SIMPLE_UPDATE,
    UPDATE,
    Flavour,
    HpeState,
    SimComponent,
    member,
    targets_of,
    update_service,
)
from sim.redfish.firmware_jobs import DELL_JOBS, JOB_SERVICE, TASKS, DellJob, JobQueue, SimTask
from sim.redfish.firmware_push import parse_push
from sim.redfish.http import Request, Response
from sim.redfish.identity import ServerIdentity
from sim.redfish.messages import info, json_object, message


class SimBmc(Protocol):
    """What this module uses of a simulated BMC (bmc.py's SimBmc; a Protocol, so bmc.py can import this module)."""

    ident: ServerIdentity
    sessions: Any  # its SessionTable: cleared when the iDRAC restarts
    _tree: dict[str, Any]

    def _authorized(self, req: Request) -> bool: ...

    def rebuild(self) -> None: ...

    def restart_host(self) -> None: ...


MAX_IMAGE = 64 * 1024 * 1024
_JOB_IDS = itertools.count(1)
_PENDING = ("New", "Running")


@dataclass
class SimFirmware:
    config: HostFirmwareConfig
    task_s: float = 1.0  # how long an update task runs
    bmc_reboot_s: float = 1.0  # how long the BMC is away after its own update
    components: dict[str, SimComponent] = field(default_factory=dict)
    bios: dict[str, Any] = field(default_factory=dict)
    pending: dict[str, Any] = field(default_factory=dict)
    pending_rule: ApplyRule = field(default_factory=lambda: ApplyRule("OnReset"))
    staged: dict[str, str] = field(default_factory=dict)  # fqdd -> version installed at the next reboot
    tasks: dict[str, SimTask] = field(default_factory=dict)
    jobs: JobQueue = field(default_factory=JobQueue)  # the iDRAC's job queue (firmware_jobs.py)
    hpe: HpeState = field(default_factory=HpeState)  # the iLO's update state (firmware_flavours.py)
    gone_until: float = 0.0
    updates: list[str] = field(default_factory=list)  # ImageURIs SimpleUpdate was given (a push: its URI's tail)
    patches: int = 0  # Bios/Settings PATCHes accepted
    _running: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.components = {c.fqdd: replace(c) for c in self.config.components}
        self.bios = dict(self.config.bios)

    @property
    def faults(self) -> frozenset[FirmwareFault]:
        return self.config.faults

    @property
    def flavour(self) -> Flavour:
        return self.config.flavour

    @property
    def apply_times(self) -> tuple[str, ...]:
        given = self.config.apply_times
        return SHAPES[self.flavour].apply_times if given is None else given

    # resources -----------------------------------------------------------------------------------

    def resource(self, bmc: SimBmc, path: str) -> dict[str, Any] | None:
        shape = SHAPES[self.flavour]
        if path == UPDATE:
            return update_service(self.flavour, simple=FirmwareFault.no_simple_update not in self.faults,
                                  hpe=self.hpe)
        if path == INVENTORY:
            return tree.collection(INVENTORY, "SoftwareInventory", "Firmware Inventory Collection",
                                   [f"{INVENTORY}/{c.rid}" for c in self.components.values()])
        if path.startswith(INVENTORY + "/"):
            rid = path.rsplit("/", 1)[1]
            comp = next((c for c in self.components.values() if c.rid == rid), None)
            return None if comp is None else member(self.flavour, comp, path, self.staged.get(comp.fqdd))
        if path == f"{tree.V1}/TaskService":
            return {"@odata.id": path, "@odata.type": "#TaskService.v1_1_4.TaskService", "Id": "TaskService",
                    "Name": "Task Service", "ServiceEnabled": True, "Tasks": tree.ref(TASKS)}
        if path == TASKS:
            return tree.collection(TASKS, "Task", "Task Collection", [f"{TASKS}/{t}" for t in self.tasks])
        if path.startswith(TASKS + "/"):
            task = self.tasks.get(path.rsplit("/", 1)[1])
            job = None if task is None else self.jobs.jobs.get(task.id)
            found = None if task is None else task.resource()
            if found is not None and job is not None:  # an iDRAC's task carries its job's state and message
                found["Oem"]["Dell"].update(JobState=job.state, Message=job.message)
            return found
        if path == BIOS:
            return self._bios(bmc)
        if path == shape.settings:
            return {"@odata.id": path, "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Settings",
                    "Name": "BIOS Configuration Pending Settings", "Attributes": dict(self.pending)}
        if self.flavour is Flavour.idrac and path.startswith((DELL_JOBS, JOB_SERVICE)):
            return self.jobs.resource(path)
        return None

    def _bios(self, bmc: SimBmc) -> dict[str, Any]:
        static = bmc._tree.get(BIOS) or {}
        attrs = {**(static.get("Attributes") or {}), **self.bios}
        attrs["SystemBiosVersion"] = next(c.version for c in self.components.values() if c.kind == "bios")
        settings: dict[str, Any] = {"@odata.type": "#Settings.v1_3_5.Settings",
                                    "SettingsObject": tree.ref(SHAPES[self.flavour].settings)}
        if self.apply_times:
            settings["SupportedApplyTimes"] = list(self.apply_times)
        return {**static, "Attributes": attrs, "@Redfish.Settings": settings}

    # requests ------------------------------------------------------------------------------------

    async def handle(self, bmc: SimBmc, req: Request) -> Response | None:
        """The answer to a request this module serves, else None (bmc.py answers it)."""
        if time.monotonic() < self.gone_until:
            return message(503, "The BMC is restarting after a firmware update.", "ServiceTemporarilyUnavailable",
                           "Retry the operation after some time.", {"Retry-After": "5"})
        path = req.path.rstrip("/") or "/"
        if path == tree.V1 and req.method == "GET":
            root = tree.service_root(bmc.ident.uuid)
            return Response.of(200, {**root, "UpdateService": tree.ref(UPDATE),
                                     "Tasks": tree.ref(f"{tree.V1}/TaskService")})  # ServiceRoot names it Tasks
        push = SHAPES[self.flavour].push
        found = self.resource(bmc, path)
        if found is None and path not in (SIMPLE_UPDATE, push):
            return None
        if not bmc._authorized(req):
            return message(401, "The authentication credentials included with this request are missing or invalid.",
                           "NoValidSession", "Log in with valid credentials and retry.")
        if req.method == "GET" and path.startswith(TASKS + "/") and found is not None:
            # A running task answers 202 (DSP0266 task monitor; sushy's TaskMonitor polls until it is not 202).
            return Response.of(200 if found["TaskState"] in ("Completed", "Exception") else 202, found)
        if req.method == "GET" and found is not None:
            if path in (INVENTORY, f"{DELL_JOBS}", f"{JOB_SERVICE}/Jobs") and "$expand" in unquote(req.query):
                found = {**found, "Members": [self.resource(bmc, m["@odata.id"]) for m in found["Members"]]}
            return Response.of(200, found)
        simple = SHAPES[self.flavour].simple_update and FirmwareFault.no_simple_update not in self.faults
        if req.method == "POST" and path == SIMPLE_UPDATE and simple:
            return self._simple_update(bmc, req)
        if req.method == "POST" and push is not None and path == push:
            return self._push(bmc, req)
        if req.method == "PATCH" and path == SHAPES[self.flavour].settings:
            return self._patch_bios(bmc, req)
        return message(405, f"The operation {req.method} is not allowed on {path}.", "OperationNotAllowed")

    def _simple_update(self, bmc: SimBmc, req: Request) -> Response:
        body = json_object(req)
        if isinstance(body, Response):
            return body
        uri, proto = body.get("ImageURI"), body.get("TransferProtocol", "HTTP")
        if not isinstance(uri, str) or not uri:
            return message(400, "The action SimpleUpdate requires the parameter ImageURI.",
                           "ActionParameterValueNotInList")
        if proto not in ("HTTP", "HTTPS") or FirmwareFault.update_refused in self.faults:
            return message(400, f"The value {proto} for the parameter TransferProtocol is not in the list of "
                           "acceptable values.", "ActionParameterValueNotInList")
        targets = targets_of(body.get("Targets"), list(self.components.values()))
        if isinstance(targets, str):
            return message(400, targets, "ActionParameterValueNotInList")
        return self._start(bmc, uri, None, targets)

    def _push(self, bmc: SimBmc, req: Request) -> Response:
        pushed = parse_push(req.headers.get("content-type", ""), req.body)
        if isinstance(pushed, str):
            return message(400, pushed, "MalformedJSON")
        params, image = pushed
        when = params.get("@Redfish.OperationApplyTime", "Immediate")
        if self.flavour is Flavour.hgx and when != "Immediate":  # OperationApplyTimeSupport lists Immediate only
            return message(400, f"The value {when} for the parameter @Redfish.OperationApplyTime is not in the list "
                           "of acceptable values.", "ActionParameterValueNotInList")
        targets = targets_of(params.get("Targets"), list(self.components.values()))
        if isinstance(targets, str):
            return message(400, targets, "ActionParameterValueNotInList")
        return self._start(bmc, (SHAPES[self.flavour].push or "").rsplit("/", 1)[-1], image, targets)

    def _start(self, bmc: SimBmc, source: str, content: bytes | None,
               targets: list[SimComponent] | None) -> Response:
        """A firmware job for an image fetched from `source` (SimpleUpdate's ImageURI) or pushed (`content`)."""
        self.updates.append(source)
        number = next(_JOB_IDS)
        prefix = SHAPES[self.flavour].task_prefix
        task = SimTask(f"JID_{int(time.time()) % 1000000:06d}{number:06d}" if prefix else str(number),
                       dell=self.flavour is Flavour.idrac)
        self.tasks[task.id] = task
        if self.flavour is Flavour.idrac:
            self.jobs.add(DellJob(task.id, "FirmwareUpdate", "Firmware Update"))
        job = asyncio.create_task(self._run(bmc, task, source, content, targets))
        self._running.add(job)
        job.add_done_callback(self._running.discard)
        if self.flavour is Flavour.ilo:  # no task: the UpdateService's Oem.Hpe.State tells the progress
            self.hpe = HpeState("Updating", 0)
            return Response.of(200, {"@Message.ExtendedInfo": [info("Success", "Successfully Completed Request")]})
        where = f"{TASKS}/{task.id}"
        if FirmwareFault.task_off_bmc in self.faults:
            where = f"https://198.51.100.7{where}"
        return Response.of(202, task.resource(), {"Location": where})

    def _progress(self, task: SimTask, percent: int) -> None:
        task.state, task.percent = "Running", percent
        if (job := self.jobs.jobs.get(task.id)) is not None:
            job.move("Running", "Job in progress.", percent)
        if self.flavour is Flavour.ilo:
            self.hpe = HpeState("Updating", percent)

    async def _run(self, bmc: SimBmc, task: SimTask, uri: str, pushed: bytes | None,
                   targets: list[SimComponent] | None) -> None:
        self._progress(task, 10)
        try:
            content = pushed if pushed is not None else await fetch_image(uri)
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            return self._end(task, "Exception", f"Unable to transfer the image from {uri}: {exc}")
        target = image_target(content)
        chosen = [c for c in (targets or self.components.values()) if target is not None and c.kind == target[0]]
        if target is None or not chosen:
            return self._end(task, "Exception", "The update package is not applicable to this system"
                             + (" or the targets named." if targets else "."))
        if (job := self.jobs.jobs.get(task.id)) is not None:
            job.name = f"Firmware Update: {chosen[0].name}"
        await asyncio.sleep(self.task_s / 2)
        self._progress(task, 50)
        if FirmwareFault.task_hangs in self.faults:
            return  # Running at 50% for ever
        if FirmwareFault.update_fails in self.faults:
            return self._end(task, "Exception", "Unable to complete the firmware update: flash write failed.")
        await asyncio.sleep(self.task_s / 2)
        if target[0] == "bmc":
            self._install(bmc, chosen, target[1])
            self._end(task, "Completed", "The BMC firmware was updated; the BMC restarts.")
            reboot = 60.0 if FirmwareFault.bmc_gone_long in self.faults else self.bmc_reboot_s
            self.gone_until = time.monotonic() + reboot
            bmc.sessions.clear()
            return None
        for c in chosen:
            self.staged[c.fqdd] = target[1]
        self._end(task, "Completed", "Job completed successfully; the update is applied at the next reboot.")
        if (job := self.jobs.jobs.get(task.id)) is not None:
            job.move("Scheduled", "Task successfully scheduled.", 100)
        return None

    def _end(self, task: SimTask, state: str, text: str) -> None:
        task.state = state
        task.percent = 100 if state == "Completed" else task.percent
        task.end = time.time()
        task.messages.append(info("Success" if state == "Completed" else "GeneralError", text))
        if (job := self.jobs.jobs.get(task.id)) is not None:
            job.move("Completed" if state == "Completed" else "Failed", text, task.percent)
        if self.flavour is Flavour.ilo:
            self.hpe = HpeState("Complete", 100) if state == "Completed" else HpeState(
                "Error", task.percent, {"MessageId": info("GeneralError", text)["MessageId"], "Message": text})

    def _install(self, bmc: SimBmc, comps: list[SimComponent], version: str) -> None:
        for c in comps:
            c.version = version
        kinds = {c.kind for c in comps}
        if "bios" in kinds:
            bmc.ident = replace(bmc.ident, bios_version=version)
        if "bmc" in kinds:
            bmc.ident = replace(bmc.ident, bmc_firmware=version)
        bmc.rebuild()

    def _patch_bios(self, bmc: SimBmc, req: Request) -> Response:
        body = json_object(req)
        if isinstance(body, Response):
            return body
        attrs = body.get("Attributes")
        if not isinstance(attrs, dict) or not attrs:
            return message(400, "The request body must carry Attributes.", "PropertyUnknown")
        rule = apply_rule(body, self.apply_times)
        if isinstance(rule, Response):
            return rule
        for name, value in attrs.items():
            if name not in self.bios and name not in ("SysProfile", "BootMode"):
                return message(400, f"The property {name} is not in the list of valid properties for the resource.",
                               "PropertyUnknown")
            if FirmwareFault.setting_refused in self.faults:
                return message(400, f"The value {value} for the property {name} is not in the list of acceptable "
                               "values.", "PropertyValueNotInList")
        self.pending.update(attrs)
        self.pending_rule = rule
        self.patches += 1
        schedule(rule, bmc.restart_host, asyncio.get_running_loop().call_later)
        done = {"@Message.ExtendedInfo": [info("Success", "Successfully Completed Request")]}
        if self.flavour is not Flavour.idrac:
            return Response.of(200, done)
        for old in self.jobs.scheduled("BIOSConfiguration"):  # one BIOS job at a time: the new one replaces it
            old.move("Failed", "Job canceled: replaced by a newer BIOS configuration job.")
        job = self.jobs.add(DellJob(f"JID_{int(time.time()) % 1000000:06d}{next(_JOB_IDS):06d}", "BIOSConfiguration",
                                    "Configure: BIOS.Setup.1-1", "Scheduled", "Task successfully scheduled.",
                                    target=SHAPES[self.flavour].settings))
        return Response.of(202, done, {"Location": f"{DELL_JOBS}/{job.id}"})

    def booted(self, bmc: SimBmc) -> None:
        """The host rebooted: staged firmware installs, pending BIOS attributes apply (unless a fault drops them, or
        their maintenance window is not open)."""
        staged, self.staged = self.staged, {}
        if FirmwareFault.version_unchanged not in self.faults:
            for fqdd, version in staged.items():
                self._install(bmc, [self.components[fqdd]], version)
        for job in self.jobs.scheduled("FirmwareUpdate"):
            job.move("Completed", "Job completed successfully.", 100)
        if not self.pending or not self.pending_rule.applies_at_boot(time.time()):
            return
        pending, self.pending = self.pending, {}
        if FirmwareFault.bios_not_applied not in self.faults:
            self.bios.update(pending)
        for job in self.jobs.scheduled("BIOSConfiguration"):
            job.move("Completed", "Job completed successfully.", 100)

    def snapshot(self) -> dict[str, Any]:
        return {"flavour": self.flavour.value, "versions": {c.fqdd: c.version for c in self.components.values()},
                "bios": dict(self.bios), "pending": dict(self.pending), "staged": dict(self.staged),
                "updates": list(self.updates), "tasks": {t.id: t.state for t in self.tasks.values()},
                "jobs": {j.id: j.state for j in self.jobs.jobs.values()}}


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
