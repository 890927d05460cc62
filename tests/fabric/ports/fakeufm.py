"""A small hostile UFM on loopback (plain HTTP, threads): port state, events, Basic auth, and faults on cue.

`fail_after`: after this many accepted POST /ufmRest/actions, every later action answers `fault`: 401,
503, or "hang" (sleeps past the client's deadline, then drops the answer); with no `fail_after`, every
request does. `heal()` ends the fault. Every
request is counted, so a test can prove a rerun sends nothing twice.

Actions run as UFM documents them (REFERENCE-wave3 C, the Actions and Jobs REST APIs): 202 with
`Location: /ufmRest/jobs/<id>`, the port changed `job_s` later when the job ends `Completed`; `GET
/ufmRest/jobs/<id>` answers the job (`ID`, `Status`, `Progress`, `Summary`, ...), an unknown id `[]`, and
`GET /ufmRest/jobs?parent_id=<id>` its one sub-job. `job_fate[<guid>_<port>]` = "fail" ends that port's
next job `Completed With Errors` (summary `fail_summary`, the port unchanged), "hang" leaves it `Running`.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class UfmState:
    user: str
    password: str
    events: list[dict[str, Any]] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)  # "<guid>_<port>"
    actions: list[tuple[str, str]] = field(default_factory=list)  # (action, port) accepted
    fault: str | None = None  # 401 | 503 | hang
    fail_after: int | None = None
    hang_s: float = 1.5
    delay_s: float = 0.0  # every answer this late (a test sampling the client's processes meanwhile)
    job_s: float = 0.0  # how long each action's job runs before the port changes
    job_fate: dict[str, str] = field(default_factory=dict)  # "<guid>_<port>" -> fail | hang (its next job)
    fail_summary: str = "Failed to disable port: switch did not answer (fake)"
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    job_polls: int = 0
    peak: int = 0  # most jobs Running at once
    location: bool = True  # False: a 202 without Location (an action UFM runs as no job)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_job(self, action: str, name: str) -> int:
        with self.lock:
            job_id = len(self.jobs) + 1
            fate = self.job_fate.pop(name, None)
            self.jobs[job_id] = {"ID": str(job_id), "Status": "Running", "Progress": 0, "Summary": "",
                                 "Description": f"{action} {name}", "RelatedObjects": [name.split("_")[0]],
                                 "Operation": action, "Created": "2026-12-01 12:00:00", "CreatedBy": self.user,
                                 "LastUpdated": "2026-12-01 12:00:00", "Foreground": True}
            self.peak = max(self.peak, sum(j["Status"] == "Running" for j in self.jobs.values()))
        if fate != "hang":
            timer = threading.Timer(self.job_s, self._end_job, (job_id, action, name, fate))
            timer.daemon = True
            timer.start()
        return job_id

    def _end_job(self, job_id: int, action: str, name: str, fate: str | None) -> None:
        with self.lock:
            job = self.jobs[job_id]
            if fate == "fail":
                job.update(Status="Completed With Errors", Progress=100, Summary=self.fail_summary)
                return
            (self.disabled.add if action == "disable" else self.disabled.discard)(name)
            job.update(Status="Completed", Progress=100)

    def heal(self) -> None:
        with self.lock:
            self.fault, self.fail_after = None, None

    def faulty(self, post: bool) -> str | None:
        with self.lock:
            if self.fault and (self.fail_after is None or (post and len(self.actions) >= self.fail_after)):
                return self.fault
            return None


def _handler(state: UfmState) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{state.user}:{state.password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _gate(self, post: bool = False) -> bool:
            time.sleep(state.delay_s)
            fault = state.faulty(post)
            if fault == "hang":
                time.sleep(state.hang_s)
                self.close_connection = True
                return False
            if fault in ("401", "503"):
                self._send(int(fault), {"error": "fault"})
                return False
            if self.headers.get("Authorization") != expected:
                self._send(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            if not self._gate():
                return
            path = self.path
            if path.startswith("/ufmRest/jobs"):
                return self._jobs(path)
            if path == "/ufmRest/app/events":
                return self._send(200, state.events)
            if path in ("/ufmRest/resources/ports", "/ufmRest/resources/links"):
                return self._send(200, [])
            if path.startswith("/ufmRest/resources/ports/"):
                name = path.rsplit("/", 1)[1]
                guid, port = name.split("_")
                phys = "Disabled" if name in state.disabled else "LinkUp"
                return self._send(200, [{"guid": guid, "number": int(port), "name": name,
                                         "physical_state": phys, "logical_state": "Down" if phys == "Disabled"
                                         else "Active", "active_width": "4x", "active_speed": "HDR"}])
            self._send(404, {"error": "no such resource"})

        def do_POST(self) -> None:
            if not self._gate(post=True):
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            name, action = body["params"]["port_id"], body["action"]
            with state.lock:
                state.actions.append((action, name))
            job_id = state.start_job(action, name)
            self.send_response(202)
            if state.location:
                self.send_header("Location", f"/ufmRest/jobs/{job_id}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _jobs(self, path: str) -> None:
            with state.lock:
                state.job_polls += 1
                if path.startswith("/ufmRest/jobs?parent_id="):
                    job = state.jobs.get(int(path.rsplit("=", 1)[1]))
                    return self._send(200, [{**job, "ID": f"{job['ID']}01"}] if job else [])
                job = state.jobs.get(int(path.rsplit("/", 1)[1]))
                return self._send(200, dict(job) if job else [])

    return Handler


@contextmanager
def fake_ufm(state: UfmState, address: str = "127.0.0.1") -> Iterator[str]:
    server = ThreadingHTTPServer((address, 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
