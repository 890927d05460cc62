"""`python -m sim.ufm.server`: the simulated UFM Enterprise REST API over HTTPS on one loopback address.

Endpoints (NVIDIA UFM Enterprise REST API Guide and REFERENCE-wave3 C; shapes pinned in tests/sim/test_ufm_sim.py
and tests/sim/test_ufm_jobs.py): `GET /ufmRest/app/events` (Events REST API, 6.24 schema), `GET
/ufmRest/resources/ports` (`?system=<guid>`, `?active=true`) and `/ports/<guid>_<port>` (Ports REST API, with
`systemID`, `peer`, `description`, `external_number`), `GET /ufmRest/resources/links` (Links REST API, as the sw-
ufm-ndr03 capture), `POST /ufmRest/actions` with action disable|enable (Actions REST API: 202 and a job,
sim/ufm/jobs.py), `GET /ufmRest/jobs[/<id>]` (Jobs REST API), `GET /ufmRest/app/smconf[?param_name=<key>]` (SM
Configuration REST API: its OpenSM's routing engine, sim/ufm/smconf.py, tests/fabric/burnin/test_engine_ufm.py),
each under the three prefixes of UFM's three ways in
(sim/ufm/auth.py: HTTP Basic on `/ufmRest`, a `/dologin` session on `/ufmRestV2`, an access token on `/ufmRestV3`;
`POST /ufmRest/app/tokens` makes one): 401 without the prefix's own kind of credential. Answers are
`application/json`. The fabric is the lab's ibsim, found through its state file; faults of `--faults` (flapping
cables, a port whose symbol errors keep rising, jobs that take their time, fail or never end) are played into it at
start, on every counter sample (`--counters-s`) and on every action. SIGTERM ends it at once (`_exit_now`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fabric.topology import End
from sim.addresses import check_loopback
from sim.redfish.http import Request, Response, serve
from sim.redfish.tlscert import make_certificates
from sim.ufm.auth import SESSION_COOKIE, UfmAuth
from sim.ufm.callers import kill_caller
from sim.ufm.fabricview import STOPPING, FabricView
from sim.ufm.faults import Faults, load_faults
from sim.ufm.jobs import SimJobs
from sim.ufm.smconf import sm_config

PASSWORD_ENV = "BRINGUP_SIM_UFM_PASSWORD"
TOKEN_ENV = "BRINGUP_SIM_UFM_TOKEN"
_PORT_NAME = re.compile(r"^/ufmRest/resources/ports/([0-9a-fA-F]{16})_(\d+)$")
_JOB_IDS = re.compile(r"^/ufmRest/jobs/([0-9,]{1,200})$")
_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}


class UfmResponse(Response):
    """UFM answers plain `application/json` (not the Redfish server's OData type and header)."""

    @classmethod
    def json(cls, status: int, payload: Any = None, headers: dict[str, str] | None = None) -> UfmResponse:
        body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        return cls(status, body, {**({"Content-Type": "application/json"} if body else {}), **(headers or {})})

    def encode(self, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Status')}",
                 *(f"{k}: {v}" for k, v in self.headers.items()), f"Content-Length: {len(self.body)}"]
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


class UfmSim:
    def __init__(self, view: FabricView, user: str, password: str, faults: Faults) -> None:
        self.view = view
        self.user = user
        self.auth = UfmAuth(user, password)
        self.faults = faults
        self.jobs = SimJobs(faults.jobs, view.set_enabled)

    async def handle(self, request: Request, peer: tuple[str, int] | None = None) -> Response:
        ok = UfmResponse.json
        if request.method == "POST" and request.path == "/dologin":
            session = self.auth.login(request)
            if session is None:
                return UfmResponse(401, b"Unauthorized", {"Content-Type": "text/plain"})
            return UfmResponse(200, b"", {"Set-Cookie": f"{SESSION_COOKIE}={session}; Path=/; Secure; HttpOnly"})
        path = self.auth.resolve(request)
        if path is None:
            return UfmResponse(401, b"Unauthorized", {"WWW-Authenticate": 'Basic realm="UFM"',
                                                      "Content-Type": "text/plain"})
        query = parse_qs(request.query)
        if request.method == "POST" and path == "/ufmRest/app/tokens":
            return ok(200, {"access_token": self.auth.new_token(), "revoked": False})
        if request.method == "GET" and path == "/ufmRest/app/events":
            return ok(200, [e.to_rest() for e in list(self.view.events)])
        if request.method == "GET" and path == "/ufmRest/resources/ports":
            return ok(200, self.ports(query))
        if request.method == "GET" and (m := _PORT_NAME.match(path)):
            end = End(m.group(1).lower(), int(m.group(2)))
            found = [p for p in self.ports({}) if p["name"] == f"{end.guid}_{end.port}"]
            return ok(200, found) if found else ok(404, {"error": "no such port"})
        if request.method == "GET" and path == "/ufmRest/resources/links":
            return ok(200, self.links())
        if request.method == "GET" and path == "/ufmRest/jobs":
            return ok(200, self.jobs.listing(query))
        if request.method == "GET" and (m := _JOB_IDS.match(path)):
            return ok(200, self.jobs.get(m.group(1)))
        if request.method == "POST" and path == "/ufmRest/actions":
            return self.action(request, peer)
        if request.method == "GET" and path == "/ufmRest/app/smconf":
            return ok(*sm_config(self.view.routing_engine, self.view.engine, query))
        return ok(404, {"error": f"{request.method} {path}: not simulated"})

    def action(self, request: Request, peer: tuple[str, int] | None = None) -> Response:
        """A port action is checked now and runs as a job after the 202 (sim/ufm/jobs.py); a `kill` fault ends
        the process that sent it (`peer`'s, sim/ufm/callers.py)."""
        try:
            body = request.json()
            action = body["action"]
            guid, port = str(body["params"]["port_id"]).split("_")
            description = str(body.get("description") or "")
        except (ValueError, KeyError, TypeError, AttributeError):
            return UfmResponse.json(400, {"error": "expected {action, params: {port_id: <guid>_<port>}, object_ids}"})
        if action not in ("disable", "enable"):
            return UfmResponse.json(400, {"error": f"action {action!r}: this simulator does disable and enable"})
        end = End(guid.lower(), int(port))
        if end.guid not in self.view.nodes:
            return UfmResponse.json(400, {"error": f"port {guid}_{port} is not in the fabric"})
        fault = self.jobs.fate(end, action)
        if fault is not None and fault.fate == "kill" and fault.when == "before":
            pid = kill_caller(peer)
            sys.stderr.write(f"ufm-sim: kill fault: {action} {guid}_{port} not started, caller {pid} killed\n")
            return UfmResponse.json(503, {"error": "simulated kill of the caller"})
        job = self.jobs.start(end, action, description, self.user, fault, lambda: self._kill(peer, action, end))
        return UfmResponse.json(202, None, {"Location": f"/ufmRest/jobs/{job.id}"})

    @staticmethod
    def _kill(peer: tuple[str, int] | None, action: str, end: End) -> None:
        pid = kill_caller(peer)
        sys.stderr.write(f"ufm-sim: kill fault: {action} {end.guid}_{end.port} done, caller {pid} killed\n")

    def ports(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """Every port UFM knows; `?system=<guid>` those of one system, `?active=true` the Active ones."""
        view = self.view
        out: list[dict[str, Any]] = []
        seen: set[End] = set()
        for link in view.topology.links:
            for end, peer in ((link.a, link.b), (link.b, link.a)):
                seen.add(end)
                out.append(self._port(end, peer, "LinkUp", "Active", link.width, link.speed))
        peers = {e: far for a, b in view.cabling for e, far in ((a, b), (b, a))}
        for end in sorted(view.actuator.down - seen):
            seen.add(end)
            out.append(self._port(end, peers.get(end), "Disabled", "Down", None, None))
        cabled = {e for key in view.cabling for e in key if e.guid in view.nodes}
        for end in sorted(cabled - seen):  # a cabled port whose peer is disabled or unplugged: no light
            out.append(self._port(end, peers.get(end), "Polling", "Down", None, None))
        if "system" in query:
            out = [p for p in out if p["systemID"] == query["system"][0].lower().removeprefix("0x")]
        if query.get("active", [""])[0].lower() == "true":
            out = [p for p in out if p["logical_state"] == "Active"]
        return out

    def _port(self, end: End, peer: End | None, phys: str, logical: str, width: str | None,
              speed: str | None) -> dict[str, Any]:
        name = self.view.name(end.guid)
        kind = "Switch" if self.view.is_switch(end.guid) else "Computer"
        return {"guid": end.guid, "number": end.port, "external_number": end.port, "name": f"{end.guid}_{end.port}",
                "dname": str(end.port), "description": f"{kind} IB Port", "systemID": end.guid,
                "system_guid": end.guid, "node_description": f"{name}:{end.port}", "system_name": name,
                "peer": f"{peer.guid}_{peer.port}" if peer is not None else "N/A",
                "logical_state": logical, "physical_state": phys, "severity": "Info",
                "active_width": (width or "").lower() or None, "active_speed": speed,
                "capabilities": ["enable", "disable"]}

    def links(self) -> list[dict[str, Any]]:
        out = []
        for link in self.view.topology.links:
            a, b = link.a, link.b
            out.append({"source_guid": a.guid, "source_port": str(a.port), "destination_guid": b.guid,
                        "destination_port": str(b.port), "source_port_dname": str(a.port),
                        "source_port_name": f"{a.guid}_{a.port}", "destination_port_dname": str(b.port),
                        "destination_port_name": f"{b.guid}_{b.port}", "width": (link.width or "4X").lower(),
                        "severity": "Info", "source_port_node_description": f"{self.view.name(a.guid)}:{a.port}",
                        "destination_port_node_description": f"{self.view.name(b.guid)}:{b.port}",
                        "name": f"{a.guid}_{a.port}:{b.guid}_{b.port}", "capabilities": ["collect_system_dump"]})
        return out


async def _poller(sim: UfmSim, every_s: float, counters_s: float) -> None:
    """Every `every_s` a look at the links (what the SM's traps tell UFM at once), and every `counters_s` the
    faults' clock and every switch's counters too (UFM's primary telemetry, whose samples its threshold events
    come from: every 30 s by default, UFM Enterprise User Manual v6.23, "Telemetry"), until SIGTERM."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(every_s)
        now = time.monotonic()
        sample = now - last >= counters_s
        try:
            if sample:
                await asyncio.to_thread(sim.faults.tick, sim.view, now - last)
            await asyncio.to_thread(sim.view.poll, None if sample else ())
        except Exception as e:  # a failed look at the fabric is logged; the next poll tries again
            sys.stderr.write(f"ufm-sim: poll failed: {type(e).__name__}: {e}\n")
        if sample:
            last = now


async def main_async(args: argparse.Namespace) -> int:
    check_loopback(args.address)
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        sys.stderr.write(f"ufm-sim: {PASSWORD_ENV} is not set\n")
        return 2
    deadline = time.monotonic() + 60
    while not args.ibsim_state.is_file():
        if time.monotonic() > deadline:
            sys.stderr.write(f"ufm-sim: no simulated fabric at {args.ibsim_state}\n")
            return 2
        await asyncio.sleep(0.2)
    view = await asyncio.to_thread(FabricView, args.ibsim_state, routing_engine=args.routing_engine)
    faults = load_faults(args.faults, view, args.design)
    await asyncio.to_thread(faults.start, view)
    sim = UfmSim(view, args.user, password, faults)
    if os.environ.get(TOKEN_ENV):  # an access token made beforehand in UFM's Settings > Access Tokens
        sim.auth.tokens.add(os.environ[TOKEN_ENV])
    _ca, cert, key = make_certificates(args.cert_dir, [args.address])
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    def connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> Any:
        peer = w.get_extra_info("peername")
        return serve(r, w, lambda request: sim.handle(request, peer[:2] if peer else None))

    server = await asyncio.start_server(connection, args.address, args.port, ssl=tls)
    sys.stdout.write(f"ufm-sim: https://{args.address}:{args.port} ({len(view.known_links)} links, "
                     f"{len(view.events)} events)\n")
    sys.stdout.flush()
    poller = asyncio.create_task(_poller(sim, args.poll_s, args.counters_s))
    async with server:
        await asyncio.gather(server.serve_forever(), poller)
    return 0


def _tool_groups() -> list[int]:
    """The process groups of the tools this process runs now: each is a child leading a session of its own
    (fabric.toolrun), so its pid names its group."""
    me, out = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
                out.append(int(stat.parent.name))
    return out


def _exit_now(signum: int, _frame: object) -> None:
    """SIGTERM or SIGINT: out within a moment, whatever is under way (a sweep's opensm, a poll, the start).
    Nothing here needs a clean-up but the tools running for a worker thread, which would outlive the process
    (their own sessions) and which the thread would wait on: they are killed, and the process leaves without
    waiting for its threads (no new tool starts after STOPPING is set)."""
    STOPPING.set()
    for _ in range(3):  # a thread that passed STOPPING's check just before it was set starts its tool at once
        for group in _tool_groups():
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_now)
    p = argparse.ArgumentParser(prog="python -m sim.ufm.server")
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, default=443)
    p.add_argument("--user", default="admin")
    p.add_argument("--ibsim-state", type=Path, required=True)
    p.add_argument("--cert-dir", type=Path, required=True)
    p.add_argument("--faults", type=Path)
    p.add_argument("--design", type=Path, help="the fabric design (faults name its nodes)")
    p.add_argument("--poll-s", type=float, default=2.0, help="seconds between looks at the links")
    p.add_argument("--counters-s", type=float, default=30.0, help="seconds between counter samples (UFM's 30)")
    p.add_argument("--routing-engine", default="ftree", help="opensm -R: the engines the SM is asked for")
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
