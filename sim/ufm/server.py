"""`python -m sim.ufm.server`: the simulated UFM Enterprise REST API over HTTPS on one loopback address.

Endpoints (NVIDIA UFM Enterprise REST API Guide; shapes pinned in tests/sim/test_ufm_sim.py):
`GET /ufmRest/app/events` (Events REST API, 6.24 schema), `GET /ufmRest/resources/ports` and
`/ports/<guid>_<port>` (Ports REST API), `GET /ufmRest/resources/links` (Links REST API, as the
sw-ufm-ndr03 capture), `POST /ufmRest/actions` with action disable|enable (Actions REST API), all behind
HTTP Basic ("REST API Complementary Information"): 401 without it. The fabric is the lab's ibsim,
found through its state file; faults of `--faults` (flapping cables, a port whose symbol errors keep
rising) are played into it at start and on every poll.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hmac
import os
import re
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import Any

from fabric.topology import End
from sim.addresses import check_loopback
from sim.redfish.http import Request, Response, serve
from sim.redfish.tlscert import make_certificates
from sim.ufm.fabricview import FabricView
from sim.ufm.faults import Faults, load_faults

PASSWORD_ENV = "BRINGUP_SIM_UFM_PASSWORD"
_PORT_NAME = re.compile(r"^/ufmRest/resources/ports/([0-9a-fA-F]{16})_(\d+)$")


class UfmSim:
    def __init__(self, view: FabricView, user: str, password: str, faults: Faults) -> None:
        self.view = view
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.faults = faults
        self.jobs = 0

    def authorised(self, request: Request) -> bool:
        return hmac.compare_digest(request.headers.get("authorization", ""), self.expected)

    async def handle(self, request: Request) -> Response:
        if not self.authorised(request):
            return Response(401, b"Unauthorized", {"WWW-Authenticate": 'Basic realm="UFM"',
                                                   "Content-Type": "text/plain"})
        path = request.path
        if request.method == "GET" and path == "/ufmRest/app/events":
            return Response.of(200, [e.to_rest() for e in list(self.view.events)])
        if request.method == "GET" and path == "/ufmRest/resources/ports":
            return Response.of(200, self.ports())
        if request.method == "GET" and (m := _PORT_NAME.match(path)):
            end = End(m.group(1).lower(), int(m.group(2)))
            found = [p for p in self.ports() if p["name"] == f"{end.guid}_{end.port}"]
            return Response.of(200, found) if found else Response.of(404, {"error": "no such port"})
        if request.method == "GET" and path == "/ufmRest/resources/links":
            return Response.of(200, self.links())
        if request.method == "POST" and path == "/ufmRest/actions":
            return await self.action(request)
        return Response.of(404, {"error": f"{request.method} {path}: not simulated"})

    async def action(self, request: Request) -> Response:
        try:
            body = request.json()
            action = body["action"]
            guid, port = str(body["params"]["port_id"]).split("_")
        except (ValueError, KeyError, TypeError):
            return Response.of(400, {"error": "expected {action, params: {port_id: <guid>_<port>}, object_ids}"})
        if action not in ("disable", "enable"):
            return Response.of(400, {"error": f"action {action!r}: this simulator does disable and enable"})
        end = End(guid.lower(), int(port))
        if end.guid not in self.view.nodes:
            return Response.of(400, {"error": f"port {guid}_{port} is not in the fabric"})
        try:
            await asyncio.to_thread(self.view.set_enabled, end, action == "enable")
        except Exception as e:  # the job failed in the fabric: UFM answers 500 with what went wrong
            return Response.of(500, {"error": f"{action} {guid}_{port}: {type(e).__name__}: {e}"})
        self.jobs += 1
        return Response(202, b"", {"Location": f"/ufmRest/jobs/{self.jobs}"})

    def ports(self) -> list[dict[str, Any]]:
        view = self.view
        out: list[dict[str, Any]] = []
        seen: set[End] = set()
        for link in view.topology.links:
            for end in (link.a, link.b):
                seen.add(end)
                out.append(self._port(end, "LinkUp", "Active", link.width, link.speed))
        for end in sorted(view.actuator.down - seen):
            seen.add(end)
            out.append(self._port(end, "Disabled", "Down", None, None))
        cabled = {e for key in view.cabling for e in key if e.guid in view.nodes}
        for end in sorted(cabled - seen):  # a cabled port whose peer is disabled or unplugged: no light
            out.append(self._port(end, "Polling", "Down", None, None))
        return out

    def _port(self, end: End, phys: str, logical: str, width: str | None, speed: str | None) -> dict[str, Any]:
        name = self.view.name(end.guid)
        return {"guid": end.guid, "number": end.port, "name": f"{end.guid}_{end.port}", "dname": str(end.port),
                "system_guid": end.guid, "node_description": f"{name}:{end.port}", "system_name": name,
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


async def _poller(sim: UfmSim, every_s: float, stop: asyncio.Event) -> None:
    last = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        now = time.monotonic()
        try:
            await asyncio.to_thread(sim.faults.tick, sim.view, now - last)
            await asyncio.to_thread(sim.view.poll)
        except Exception as e:  # a failed look at the fabric is logged; the next poll tries again
            sys.stderr.write(f"ufm-sim: poll failed: {type(e).__name__}: {e}\n")
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
    view = await asyncio.to_thread(FabricView, args.ibsim_state)
    faults = load_faults(args.faults, view, args.design)
    await asyncio.to_thread(faults.start, view)
    sim = UfmSim(view, args.user, password, faults)
    _ca, cert, key = make_certificates(args.cert_dir, [args.address])
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = await asyncio.start_server(lambda r, w: serve(r, w, sim.handle), args.address, args.port, ssl=tls)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"ufm-sim: https://{args.address}:{args.port} ({len(view.known_links)} links, "
                     f"{len(view.events)} events)\n")
    sys.stdout.flush()
    poller = asyncio.create_task(_poller(sim, args.poll_s, stop))
    async with server:
        await stop.wait()
    await poller
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.ufm.server")
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, default=443)
    p.add_argument("--user", default="admin")
    p.add_argument("--ibsim-state", type=Path, required=True)
    p.add_argument("--cert-dir", type=Path, required=True)
    p.add_argument("--faults", type=Path)
    p.add_argument("--design", type=Path, help="the fabric design (faults name its nodes)")
    p.add_argument("--poll-s", type=float, default=2.0)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
