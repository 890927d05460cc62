"""A typed async client of UFM Enterprise's REST API (httpx), and the `Actuator` that disables ports with it.

Authentication as NVIDIA's REST API guide gives it ("REST API Complementary Information"), the site's
`fabric.ufm.auth`: `basic`, HTTP Basic on `/ufmRest/...` (`curl -k https://<ufm-ip>/ufmRest/resources/systems -u
<user>:<password>`); `session`, a login at `POST /dologin` (form fields `httpd_username`, `httpd_password`) whose
cookie then opens `/ufmRestV2/...`, logged in again once when UFM drops the session (401); `token`, the
credential's password is an access token (UFM's Settings > Access Tokens), sent as `Authorization: Basic
<token>` on `/ufmRestV3/...`. Paths below are written under `/ufmRest` and moved to the prefix of the site's
kind. TLS follows the site (`fabric.ufm.verify_tls`, `ca_bundle`). Every request has a deadline and every
answer a size bound; statuses become errors in one place (`fabric.ufm.errors.error_for_status`). The
password (or token) is a `Secret`, revealed only into httpx's auth, the login form or the header; it is in no
URL, message or log line.

Endpoints: `GET /ufmRest/app/events`, `GET /ufmRest/resources/ports` (and `/ports/<name>`), `GET
/ufmRest/resources/links`, `GET /ufmRest/app/smconf` (OpenSM's configuration: its routing engine), and port
disable/enable through the Actions REST API (`POST /ufmRest/actions` with `{"action": "disable"|"enable",
"params": {"port_id": "<guid>_<port>"}, "object_ids": ["<guid>"], "object_type": "System", "identifier":
"id"}`), which answers 202 with a job that runs after the answer
(`fabric.ufm.jobs`). A port change is done when its job is: `wait_job` polls `GET /ufmRest/jobs/<id>` (first
after `POLL_FIRST_S`, backing off to `POLL_MAX_S`; NVIDIA's own `job_polling.py` polls every 3 s) until it is no
longer `Running` or `job_timeout_s` has passed since the 202; a poll that UFM answers 5xx or not at all is
tried again within that deadline. A job that ends other than `Completed` is a `UfmJobFailed` naming its
status and summaries (its sub-jobs', `GET /ufmRest/jobs?parent_id=<id>`); one still running at the deadline
is a `UfmJobTimeout`. Job answers are bounded to `JOB_MAX_BODY`.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Literal

import httpx

from fabric.ports.actuate import PortStatus
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import End
from fabric.ufm.errors import (
    UfmAuthError,
    UfmError,
    UfmJobFailed,
    UfmJobTimeout,
    UfmProtocolError,
    UfmTimeout,
    UfmUnavailable,
    error_for_status,
)
from fabric.ufm.jobs import UfmJob, job_id_from_location, job_list, one_job
from provision.site.credentials import Login
from provision.site.tls import tls_context
from provision.state.peer_json import JsonTooDeep, loads

UfmAuthKind = Literal["basic", "session", "token"]
PREFIXES: dict[str, str] = {"basic": "/ufmRest", "session": "/ufmRestV2", "token": "/ufmRestV3"}
MAX_BODY = 64 << 20  # a 12,000-cable fabric's ports list is tens of MB
JOB_MAX_BODY = 1 << 20  # a job, its sub-jobs, an action's answer
JOB_TIMEOUT_S = 120.0  # NVIDIA's batch_isolate_devices.py waits 10 x 20 s for its jobs; a port change takes seconds
POLL_FIRST_S, POLL_MAX_S, POLL_FACTOR = 0.25, 2.0, 1.5
SMCONF_MAX_BODY = 1 << 20  # opensm.conf's few hundred keys
MAX_SUB_JOBS = 20  # sub-job summaries kept in a failed job's message


class UfmClient:
    def __init__(self, url: str, login: Login, *, verify: bool = True, ca_bundle: Path | None = None,
                 timeout_s: float = 30.0, max_body: int = MAX_BODY, job_timeout_s: float = JOB_TIMEOUT_S,
                 auth: UfmAuthKind = "basic") -> None:
        self.base = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_body = max_body
        self.job_timeout_s = job_timeout_s
        self.auth = auth
        self._login = login
        self._session = False  # logged in at /dologin (auth "session")
        basic = (login.username, login.password.reveal()) if auth == "basic" else None
        headers = {"Authorization": f"Basic {login.password.reveal()}"} if auth == "token" else None
        self._http = httpx.AsyncClient(base_url=self.base, auth=basic, headers=headers,
                                       verify=tls_context(verify, ca_bundle, service="UFM"), timeout=timeout_s,
                                       follow_redirects=False)

    async def __aenter__(self) -> UfmClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _log_in(self, timeout: float) -> None:
        """`POST /dologin` with the site's credential; its session cookie opens `/ufmRestV2`."""
        form = {"httpd_username": self._login.username, "httpd_password": self._login.password.reveal()}
        try:
            async with asyncio.timeout(timeout):
                answer = await self._http.post("/dologin", data=form)
        except TimeoutError:
            raise UfmTimeout(f"POST /dologin: UFM did not answer within {timeout:g} s") from None
        except httpx.HTTPError as e:
            raise UfmUnavailable(f"POST /dologin: cannot reach UFM at {self.base}: {type(e).__name__}") from None
        error = error_for_status(answer.status_code, "POST /dologin", answer.text[:2000])
        if error is not None:
            raise error
        if not answer.cookies:
            raise UfmAuthError("POST /dologin: UFM set no session cookie: check the site's fabric.ufm credential")
        self._session = True

    async def _request(self, method: str, path: str, body: Any = None, *, max_body: int | None = None,
                       timeout_s: float | None = None) -> tuple[int, str, httpx.Headers]:
        if self.auth != "session":
            return await self._send(method, path, body, max_body=max_body, timeout_s=timeout_s)
        fresh = not self._session
        if fresh:
            await self._log_in(timeout_s or self.timeout_s)
        try:
            return await self._send(method, path, body, max_body=max_body, timeout_s=timeout_s)
        except UfmAuthError:
            if fresh:
                raise
            await self._log_in(timeout_s or self.timeout_s)  # the session expired: once more, logged in again
            return await self._send(method, path, body, max_body=max_body, timeout_s=timeout_s)

    async def _send(self, method: str, path: str, body: Any = None, *, max_body: int | None = None,
                    timeout_s: float | None = None) -> tuple[int, str, httpx.Headers]:
        what = f"{method} {path}"
        if path.startswith("/ufmRest/"):
            path = PREFIXES[self.auth] + path[len("/ufmRest"):]
        limit = max_body or self.max_body
        timeout = timeout_s or self.timeout_s
        try:
            async with asyncio.timeout(timeout):
                async with self._http.stream(method, path, json=body) as answer:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in answer.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise UfmProtocolError(f"{what}: answer larger than {limit} bytes")
                        chunks.append(chunk)
                    text = b"".join(chunks).decode("utf-8", errors="replace")
        except TimeoutError:
            raise UfmTimeout(f"{what}: UFM did not answer within {timeout:g} s") from None
        except httpx.HTTPError as e:
            raise UfmUnavailable(f"{what}: cannot reach UFM at {self.base}: {type(e).__name__}") from None
        error = error_for_status(answer.status_code, what, text)
        if error is not None:
            raise error
        return answer.status_code, text, answer.headers

    async def get_text(self, path: str) -> str:
        return (await self._request("GET", path))[1]

    async def _get_json(self, path: str, max_body: int, timeout_s: float | None = None) -> Any:
        text = (await self._request("GET", path, max_body=max_body, timeout_s=timeout_s))[1]
        try:
            return loads(text, what=f"GET {path}")
        except JsonTooDeep as exc:
            raise UfmProtocolError(str(exc)) from None
        except json.JSONDecodeError:
            raise UfmProtocolError(f"GET {path}: not JSON") from None

    async def events(self) -> str:
        return await self.get_text("/ufmRest/app/events")

    async def ports(self) -> str:
        return await self.get_text("/ufmRest/resources/ports")

    async def links(self) -> str:
        return await self.get_text("/ufmRest/resources/links")

    async def sm_config(self) -> str:
        """OpenSM's configuration as UFM serves it (`fabric.ufm.smconf`)."""
        return (await self._request("GET", "/ufmRest/app/smconf", max_body=SMCONF_MAX_BODY))[1]

    async def port(self, end: End) -> dict[str, Any]:
        text = await self.get_text(f"/ufmRest/resources/ports/{end.guid}_{end.port}")
        try:
            data = loads(text, what=f"GET /ufmRest/resources/ports/{end.guid}_{end.port}")
        except JsonTooDeep as exc:
            raise UfmProtocolError(str(exc)) from None
        except json.JSONDecodeError:
            raise UfmProtocolError(f"GET /ufmRest/resources/ports/{end.guid}_{end.port}: not JSON") from None
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict):
            raise UfmProtocolError(f"port {end.guid}_{end.port}: expected one port object")
        return data

    async def port_action(self, end: End, action: str) -> str:
        """Start `action` on the port; the id of the job UFM runs it as (202 and `Location: .../jobs/<id>`)."""
        body = {"params": {"port_id": f"{end.guid}_{end.port}"}, "action": action, "object_ids": [end.guid],
                "object_type": "System", "description": f"bringup fabric ports: {action}", "identifier": "id"}
        what = "POST /ufmRest/actions"
        status, _text, headers = await self._request("POST", "/ufmRest/actions", body, max_body=JOB_MAX_BODY)
        location = headers.get("location")
        if status != 202 or not location:
            raise UfmProtocolError(f"{what} ({action} {end.guid}_{end.port}): UFM answered HTTP {status} "
                                   f"{'without a Location' if not location else ''} (expected 202 and Location: "
                                   ".../jobs/<id>): the change cannot be followed to its end")
        return job_id_from_location(location, what)

    async def job(self, job_id: str, timeout_s: float | None = None) -> UfmJob | None:
        """`GET /ufmRest/jobs/<id>`; None when UFM does not know the job."""
        path = f"/ufmRest/jobs/{job_id}"
        return one_job(await self._get_json(path, JOB_MAX_BODY, timeout_s), job_id, f"GET {path}")

    async def sub_jobs(self, job_id: str) -> list[UfmJob]:
        """`GET /ufmRest/jobs?parent_id=<id>`: the job's per-target sub-jobs."""
        path = f"/ufmRest/jobs?parent_id={job_id}"
        return job_list(await self._get_json(path, JOB_MAX_BODY), f"GET {path}")[:MAX_SUB_JOBS]

    async def wait_job(self, job_id: str, what: str) -> tuple[UfmJob, float]:
        """Poll the job until it is no longer `Running`; the job and the seconds it took. Raises
        `UfmJobFailed` (it ended other than Completed, or UFM lost it) or `UfmJobTimeout` (still running)."""
        started = time.monotonic()
        deadline = started + self.job_timeout_s
        delay = POLL_FIRST_S
        last: UfmJob | None = None
        transient: UfmError | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                seen = last.describe() if last else f"UFM job {job_id} never answered ({transient})"
                raise UfmJobTimeout(f"{what}: {seen} after {self.job_timeout_s:g} s (the deadline); UFM may still "
                                    "finish it: the next run reads the port before sending anything")
            await asyncio.sleep(min(delay, left))
            delay = min(delay * POLL_FACTOR, POLL_MAX_S)
            try:
                job = await self.job(job_id, timeout_s=min(self.timeout_s, max(deadline - time.monotonic(), 0.1)))
            except (UfmUnavailable, UfmTimeout) as e:  # UFM restarting, a slow answer: ask again in time
                transient = e
                continue
            if job is None:
                raise UfmJobFailed(f"{what}: UFM no longer knows job {job_id} (GET /ufmRest/jobs/{job_id} "
                                   "answered an empty list): the port is read to see what happened")
            last = job
            if job.running:
                continue
            took = time.monotonic() - started
            if job.succeeded:
                return job, took
            raise UfmJobFailed(f"{what}: {job.describe()}{await self._sub_summaries(job)} (after {took:.1f} s)")

    async def _sub_summaries(self, job: UfmJob) -> str:
        try:
            subs = await self.sub_jobs(job.id)
        except UfmError as e:
            return f"; its sub-jobs could not be read: {e}"
        lines = [f"sub-job {s.id} ({(s.related or ('?',))[0]}) {s.status}" + (f": {s.summary}" if s.summary else "")
                 for s in subs if not s.succeeded and s.summary != job.summary]
        return ("; " + "; ".join(lines)) if lines else ""


def port_status(end: End, obj: dict[str, Any]) -> PortStatus:
    """A UFM port object as a `PortStatus` (physical_state, logical_state, active_width, active_speed)."""
    phys = str(obj.get("physical_state") or "")
    if not phys:
        raise UfmProtocolError(f"port {end.guid}_{end.port}: UFM gave no physical_state")
    width = normalise_width(str(obj["active_width"])) if obj.get("active_width") else None
    speed = normalise_speed(str(obj["active_speed"])) if obj.get("active_speed") else None
    logical = str(obj["logical_state"]) if obj.get("logical_state") else None
    return PortStatus(end, phys.replace(" ", ""), logical, width, speed)


class UfmActuator:
    """Ports changed through UFM, which reaches both ends of every link (it is the subnet manager)."""

    via = "ufm"

    def __init__(self, client: UfmClient) -> None:
        self.client = client

    def reaches(self, end: End, is_switch: bool) -> bool:
        return True

    async def status(self, end: End) -> PortStatus:
        return port_status(end, await self.client.port(end))

    async def set_enabled(self, end: End, enabled: bool) -> str:
        """Start the change and follow its job to its end; the note for the ledger ("UFM job 12 Completed
        (seen after 3.1 s)"). The caller reads the port afterwards: a completed job is not proof on its own."""
        action = "enable" if enabled else "disable"
        job_id = await self.client.port_action(end, action)
        job, took = await self.client.wait_job(job_id, f"{action} {end.guid}_{end.port}")
        warnings = f": {job.summary}" if job.summary and job.status != "Completed" else ""
        return f"UFM job {job.id} {job.status}{warnings} (seen after {took:.1f} s)"
