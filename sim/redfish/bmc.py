"""One simulated iDRAC: authentication, sessions, ETags, `$expand`, boot override and power.

Behaviour pinned to the Redfish specification (DSP0266) and iDRAC9 practice:
- `/redfish`, the service root, `/redfish/v1/odata` and `/redfish/v1/$metadata` answer without credentials
  (DSP0266, "Authentication requirements"); everything else needs Basic auth or a session's `X-Auth-Token`;
- sessions as `sessions.py` describes (create, read, delete, idle expiry, a limit per BMC);
- GET answers carry `Allow` with the methods the resource takes, and a method it does not take is
  405 with the same header (DSP0266, the Allow response header);
- the ComputerSystem carries an ETag; a PATCH with a stale `If-Match` gets 412;
- a boot override with `BootSourceOverrideEnabled: Once` is consumed by the next boot;
- power changes take `power_delay_s` (PowerState reads PoweringOn/PoweringOff meanwhile);
- errors carry `error.@Message.ExtendedInfo` with Base registry message ids;
- the query parameters the service root advertises (`ProtocolFeaturesSupported`) work as DSP0266
  7.3 says: `$expand` with `*`, `.` (every hyperlink outside `Links`), `~` (those inside `Links`) and
  `$levels` up to `MaxLevels`; `$select` (with `/` for nested properties; `@odata.id`/`type`/
  `context` always kept; on a collection it selects in the expanded members); `only`; any other
  `$` parameter is 501 Not Implemented, a malformed value 400, and other unknown parameters are ignored.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from dataclasses import dataclass, field
from typing import Any

from sim.redfish import metadata, tree
from sim.redfish.accounts import account_resources
from sim.redfish.faults import Fault
from sim.redfish.firmware import SimFirmware
from sim.redfish.http import HANG, JSON_TYPE, Hang, Request, Response
from sim.redfish.identity import ServerIdentity
from sim.redfish.messages import info, json_object, message
from sim.redfish.query import parse_query, select_properties
from sim.redfish.sessions import SessionTable, session_resource


@dataclass
class Settings:
    latency_s: float = 0.0
    slow_s: float = 2.0
    power_delay_s: float = 1.0
    session_timeout_s: float = float(tree.SESSION_TIMEOUT_S)


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison of two strings of any characters (compare_digest refuses non-ASCII str)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


@dataclass
class SimBmc:
    ident: ServerIdentity
    username: str
    password: str
    settings: Settings
    faults: frozenset[Fault] = frozenset()
    power: str = "Off"
    boot: dict[str, Any] = field(default_factory=lambda: {
        "BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
        "BootSourceOverrideMode": "UEFI"})
    version: int = 1
    sessions: SessionTable = field(init=False)
    boots: list[str] = field(default_factory=list)  # what each boot booted from
    requests: int = 0
    resets: list[str] = field(default_factory=list)
    _tree: dict[str, Any] = field(default_factory=dict)
    _cache: dict[str, bytes] = field(default_factory=dict)  # serialised static answers, by request target
    _power_task: asyncio.Task[None] | None = None
    firmware: SimFirmware | None = None  # UpdateService, TaskService, Bios/Settings (firmware.py)

    def __post_init__(self) -> None:
        self.sessions = SessionTable(tree.SESSIONS, self.settings.session_timeout_s)
        self.rebuild()

    def rebuild(self) -> None:
        self._tree = {**tree.static_tree(self.ident, self.faults), **account_resources(self.username)}
        self._cache = {}

    def set_faults(self, faults: frozenset[Fault]) -> None:
        self.faults = faults
        self.rebuild()

    @property
    def etag(self) -> str:
        return f'W/"{self.version}"'

    @property
    def health(self) -> str:
        return "Critical" if Fault.power_fault in self.faults else "OK"

    def snapshot(self) -> dict[str, Any]:
        return {"address": self.ident.address, "port": self.ident.port, "power": self.power, "boot": dict(self.boot),
                "faults": sorted(f.value for f in self.faults), "sessions": len(self.sessions),
                "boots": list(self.boots), "resets": list(self.resets), "requests": self.requests}

    # resources -----------------------------------------------------------------------------------

    def resource(self, path: str) -> dict[str, Any] | None:
        if path == tree.SYSTEM:
            return tree.system_resource(self.ident, self.power, self.boot, self.health)
        if path == tree.CHASSIS:
            return tree.chassis_resource(self.ident, self.power, self.health)
        if path == tree.V1:
            return tree.service_root(self.ident.uuid)
        if path == tree.SESSIONS:
            return tree.collection(path, "Session", "Session Collection", self.sessions.members())
        if path.startswith(tree.SESSIONS + "/"):
            session = self.sessions.by_id(path[len(tree.SESSIONS) + 1:])
            return session_resource(session) if session is not None else None
        # Static resources are shared, never mutated: `_expand` builds new containers where it inlines.
        found: dict[str, Any] | None = self._tree.get(path)
        return found

    def _expand(self, value: Any, levels: int, mode: str, touched: set[str], under_links: bool = False) -> Any:
        """Replace hyperlinks (`{"@odata.id": ...}`) with the resources they name, `levels` deep: all of
        them (`*`), those outside the resource's `Links` (`.`), or those inside it (`~`). The paths
        inlined are added to `touched`."""
        if isinstance(value, dict):
            target = value.get("@odata.id")
            if len(value) == 1 and isinstance(target, str) and levels > 0:
                if mode == "*" or (mode == "." and not under_links) or (mode == "~" and under_links):
                    found = self.resource(target)
                    if found is not None:
                        touched.add(target)
                        return self._expand(found, levels - 1, mode, touched)
                return value
            return {k: self._expand(v, levels, mode, touched, under_links or k == "Links") for k, v in value.items()}
        if isinstance(value, list):
            return [self._expand(v, levels, mode, touched, under_links) for v in value]
        return value

    # request handling ----------------------------------------------------------------------------

    def _authorized(self, req: Request) -> bool:
        if Fault.wrong_password in self.faults:
            return False
        token = req.headers.get("x-auth-token")
        if token is not None:
            return self.sessions.use(token)
        auth = req.headers.get("authorization", "")
        if not auth.lower().startswith("basic "):
            return False
        try:
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return _same(user, self.username) and _same(password, self.password)

    async def handle(self, req: Request) -> Response | Hang:
        self.requests += 1
        if self.firmware is not None and (answer := await self.firmware.handle(self, req)) is not None:
            return answer
        if Fault.hang in self.faults:
            return HANG
        delay = self.settings.latency_s + (self.settings.slow_s if Fault.slow in self.faults else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        if Fault.http_503 in self.faults:
            return message(503, "The iDRAC is busy processing another request; retry the operation later.",
                           "ServiceTemporarilyUnavailable", "Retry the operation after some time.",
                           {"Retry-After": "1"})
        path = req.path.rstrip("/") or "/"
        if req.method == "GET":
            if path == "/redfish":
                return Response.of(200, {"v1": "/redfish/v1/"})
            if path == tree.V1:
                return Response.of(200, self.resource(tree.V1), {"Allow": "GET"})
            if path == metadata.ODATA:
                return Response.of(200, metadata.service_document(tree.service_root(self.ident.uuid)),
                                   {"Allow": "GET"})
            if path == metadata.METADATA:
                return Response(200, metadata.METADATA_XML, {"Content-Type": metadata.XML_TYPE, "Allow": "GET"})
        if path == tree.SESSIONS and req.method == "POST":
            return self._login(req)
        if not self._authorized(req):
            return message(401, "The authentication credentials included with this request are missing or invalid.",
                           "NoValidSession", "Log in with valid credentials and retry.")
        allowed = tree.allowed_methods(path)
        if req.method == "GET" and "GET" in allowed:
            return self._get(path, req.query)
        if req.method == "PATCH" and "PATCH" in allowed:
            return self._patch_system(req)
        if req.method == "POST" and path == tree.RESET:
            return self._reset(req)
        if req.method == "DELETE" and path.startswith(tree.SESSIONS + "/"):
            if self.sessions.delete(path[len(tree.SESSIONS) + 1:]):
                done = info("Success", "The request completed successfully.")
                return Response.of(200, {"@Message.ExtendedInfo": [done]})
        elif self.resource(path) is not None or path in (tree.RESET, metadata.ODATA, metadata.METADATA):
            return message(405, f"The operation {req.method} is not allowed on {path}.", "OperationNotAllowed",
                           headers={"Allow": ", ".join(allowed)})
        return message(404, f"The resource at the URI {path} was not found.", "ResourceMissingAtURI",
                       "Place a valid resource at the URI or correct the URI and resubmit the request.")

    def _login(self, req: Request) -> Response:
        try:
            body = req.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("UserName"), str):
            return message(400, "The request body submitted was malformed JSON or is missing UserName/Password.",
                           "MalformedJSON")
        ok = (Fault.wrong_password not in self.faults
              and _same(str(body.get("UserName")), self.username)
              and _same(str(body.get("Password", "")), self.password))
        if not ok:
            return message(401, "Unable to log in: the user name or password is incorrect.", "NoValidSession",
                           "Log in with valid credentials and retry.")
        made = self.sessions.create(self.username)
        if made is None:
            return message(400, "The maximum number of user sessions is reached.", "SessionLimitExceeded",
                           "Close one or more sessions before creating a session.")
        token, session = made
        return Response.of(201, session_resource(session), {"X-Auth-Token": token, "Location": session.path})

    def _get(self, path: str, query: str) -> Response:
        # Answers that contain no power/boot/session state are serialised once.
        key = f"{path}?{query}"
        cached = self._cache.get(key)
        allow = ", ".join(tree.allowed_methods(path))
        if cached is not None:
            return Response(200, cached, {"Content-Type": JSON_TYPE, "Allow": allow})
        found = self.resource(path)
        if found is None:
            return message(404, f"The resource at the URI {path} was not found.", "ResourceMissingAtURI",
                           "Place a valid resource at the URI or correct the URI and resubmit the request.")
        parsed = parse_query(query)
        if isinstance(parsed, Response):
            return parsed
        touched = {path}
        if parsed.only:
            members = found.get("Members")
            if not isinstance(members, list):
                return message(400, f"The query parameter only is not supported on {path}.",
                               "QueryNotSupportedOnResource", "Remove the query parameter and resubmit.")
            if len(members) == 1 and isinstance(target := members[0].get("@odata.id"), str):
                return self._get(target, "")
        if parsed.expand is not None:
            found = self._expand(found, parsed.expand[1], parsed.expand[0], touched)
        if parsed.select is not None:
            names = parsed.select
            if isinstance(found.get("Members"), list):  # a collection: select in its (expanded) members
                found = {**found, "Members": [select_properties(m, names) if isinstance(m, dict) and len(m) > 1 else m
                                              for m in found["Members"]]}
            else:
                found = select_properties(found, names)
        headers = {"ETag": self.etag, "Allow": allow} if path == tree.SYSTEM else {"Allow": allow}
        response = Response.of(200, found, headers)
        if not any(tree.is_dynamic(p) for p in touched):
            self._cache[key] = response.body
        return response

    def _patch_system(self, req: Request) -> Response:
        if_match = req.headers.get("if-match")
        if if_match is not None and if_match not in (self.etag, "*"):
            return message(412, "The ETag supplied did not match the ETag required to change this resource.",
                           "PreconditionFailed", "Try the operation again using the appropriate ETag.")
        body = json_object(req)
        if isinstance(body, Response):
            return body
        boot = body.get("Boot")
        if not isinstance(boot, dict) or set(body) != {"Boot"}:
            return message(400, "Only the Boot property can be modified on this simulated system.",
                           "PropertyNotWritable")
        allowed = {"BootSourceOverrideTarget": tree.BOOT_TARGETS,
                   "BootSourceOverrideEnabled": ["Once", "Continuous", "Disabled"],
                   "BootSourceOverrideMode": ["UEFI", "Legacy"]}
        for key, value in boot.items():
            if key not in allowed:
                return message(400, f"The property {key} is not in the list of valid properties for the resource.",
                               "PropertyUnknown")
            if value not in allowed[key]:
                return message(400, f"The value {value} for the property {key} is not in the list of acceptable "
                               "values.", "PropertyValueNotInList")
        self.boot.update(boot)
        self.version += 1
        return Response.of(200, {"@Message.ExtendedInfo": [info("Success", "Successfully Completed Request")]},
                           {"ETag": self.etag})

    def _reset(self, req: Request) -> Response:
        try:
            body = req.json()
        except ValueError:
            body = None
        kind = body.get("ResetType") if isinstance(body, dict) else None
        if kind not in tree.RESET_TYPES:
            return message(400, f"The value {kind} for the parameter ResetType is not in the list of acceptable "
                           "values.", "ActionParameterValueNotInList")
        on = self.power in ("On", "PoweringOn")
        if kind in ("On",) and on:
            return message(409, "Unable to perform the reset operation: the server is already powered on.",
                           "ActionParameterValueConflict")
        if kind in ("ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart") and not on:
            return message(409, "Unable to perform the reset operation: the server is powered off.",
                           "ActionParameterValueConflict")
        self.resets.append(str(kind))
        if Fault.power_fault in self.faults:
            return Response(204)  # accepted, but the server never changes state
        if self._power_task is not None and not self._power_task.done():
            self._power_task.cancel()
        if kind in ("On", "PushPowerButton") and not on:
            self._power_task = asyncio.create_task(self._power_on())
        elif kind in ("ForceOff", "GracefulShutdown", "PushPowerButton"):
            self._power_task = asyncio.create_task(self._power_off())
        elif kind in ("ForceRestart", "GracefulRestart", "PowerCycle"):
            self._power_task = asyncio.create_task(self._restart())
        return Response(204)

    def restart_host(self) -> None:
        """The BMC resets the host by itself (a BIOS change applied Immediate or at its maintenance window's start):
        a running host restarts, one that is off applies it as it would at its next boot."""
        if self.power not in ("On", "PoweringOn"):
            if self.firmware is not None:
                self.firmware.booted(self)
            return
        self.resets.append("BmcRestart")
        if self._power_task is not None and not self._power_task.done():
            self._power_task.cancel()
        self._power_task = asyncio.create_task(self._restart())

    async def _power_on(self) -> None:
        self.power = "PoweringOn"
        await asyncio.sleep(self.settings.power_delay_s)
        self.power = "On"
        self._booted()

    async def _power_off(self) -> None:
        self.power = "PoweringOff"
        await asyncio.sleep(self.settings.power_delay_s)
        self.power = "Off"
        self.version += 1

    async def _restart(self) -> None:
        await self._power_off()
        await self._power_on()

    def _booted(self) -> None:
        """The server POSTs: a Once override is used for this boot and then cleared."""
        if self.firmware is not None:
            self.firmware.booted(self)
        if self.boot["BootSourceOverrideEnabled"] in ("Once", "Continuous"):
            self.boots.append(self.boot["BootSourceOverrideTarget"])
            if self.boot["BootSourceOverrideEnabled"] == "Once":
                self.boot["BootSourceOverrideEnabled"] = "Disabled"
                self.boot["BootSourceOverrideTarget"] = "None"
        else:
            self.boots.append("Hdd")
        self.version += 1
