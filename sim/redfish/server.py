"""The simulator process: one listener per BMC address, TLS, and a loopback control API.

Control API (plain HTTP, loopback only, for tests, benchmarks and the demo):
    GET  /hosts          every BMC's power, boot override, faults, open sessions, boots, request count
    PUT  /faults         body {hostname: [fault, ...]}: replace every host's faults
    POST /repair         clear every fault ("the technician fixed them")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.site import Site
from provision.site.credentials import login
from sim.addresses import check_loopback
from sim.redfish.bmc import Settings, SimBmc
from sim.redfish.faults import Fault, parse_faults
from sim.redfish.firmware import attach as attach_firmware
from sim.redfish.firmware_config import site_configs
from sim.redfish.http import Hang, Request, Response, serve
from sim.redfish.identity import identity
from sim.redfish.tlscert import make_certificates

# A TLS alert record: level fatal (2), description handshake_failure (40), as a BMC whose TLS
# settings share nothing with the client would send.
HANDSHAKE_FAILURE = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])


@dataclass
class _Listener:
    server: asyncio.Server
    tls: bool


class Simulator:
    def __init__(self, site: Site, settings: Settings, faults: dict[str, frozenset[Fault]], cert_dir: Path,
                 control: tuple[str, int] | None, key_type: str = "ecdsa") -> None:
        self.site = site
        self.key_type = key_type
        self.settings = settings
        self.cert_dir = cert_dir
        self.control = control
        self.bmcs: dict[str, SimBmc] = {}
        for host in site.hosts():
            check_loopback(host.bmc.address)
            cred = login(site, host.bmc.credential)
            self.bmcs[host.hostname] = SimBmc(identity(site, host), cred.username, cred.password.reveal(), settings,
                                              faults.get(host.hostname, frozenset()))
        unknown = sorted(set(faults) - set(self.bmcs))
        if unknown:
            raise ValueError(f"faults name hosts the site does not have: {', '.join(unknown)}")
        attach_firmware(self.bmcs, site_configs(site))  # firmware.py, versions and faults: firmware_config.py
        self._listeners: dict[str, _Listener] = {}
        self._control_server: asyncio.Server | None = None
        self._ssl: ssl.SSLContext | None = None
        self.ca_path: Path | None = None

    async def start(self) -> None:
        addresses = [b.ident.address for b in self.bmcs.values()]
        self.ca_path, cert, key = make_certificates(self.cert_dir, addresses, self.key_type)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(cert, key)
        # No TLS 1.3 session tickets: a client talks to each BMC over one connection, so a ticket is
        # never used, and issuing two per handshake (OpenSSL's default) costs both sides CPU.
        ctx.num_tickets = 0
        self._ssl = ctx
        await asyncio.gather(*(self._ensure_listener(name) for name in self.bmcs))
        if self.control is not None:
            host, port = self.control
            check_loopback(host)
            self._control_server = await asyncio.start_server(
                lambda r, w: serve(r, w, self._control), host, port, reuse_address=True)

    async def _ensure_listener(self, name: str) -> None:
        bmc = self.bmcs[name]
        want_tls = Fault.tls_error not in bmc.faults
        current = self._listeners.get(name)
        if Fault.unreachable in bmc.faults:
            if current is not None:
                current.server.close()
                del self._listeners[name]
            return
        if current is not None and current.tls == want_tls:
            return
        if current is not None:
            current.server.close()
            await current.server.wait_closed()

        async def on_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await serve(reader, writer, bmc.handle)

        async def on_plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                await reader.read(4096)
                writer.write(HANDSHAKE_FAILURE)
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(
            on_tls if want_tls else on_plain, bmc.ident.address, bmc.ident.port,
            ssl=self._ssl if want_tls else None, reuse_address=True, backlog=256,
            ssl_handshake_timeout=10 if want_tls else None)
        self._listeners[name] = _Listener(server, want_tls)

    async def apply_faults(self, faults: dict[str, frozenset[Fault]]) -> None:
        unknown = sorted(set(faults) - set(self.bmcs))
        if unknown:
            raise ValueError(f"unknown hosts: {', '.join(unknown)}")
        for name, bmc in self.bmcs.items():
            bmc.set_faults(faults.get(name, frozenset()))
            await self._ensure_listener(name)

    async def _control(self, req: Request) -> Response | Hang:
        try:
            if req.method == "GET" and req.path == "/hosts":
                return Response.of(200, {n: b.snapshot() for n, b in self.bmcs.items()})
            if req.method == "PUT" and req.path == "/faults":
                body: Any = req.json() or {}
                await self.apply_faults(parse_faults(json.dumps({"faults": body}), "PUT /faults"))
                return Response.of(200, {"faults": {n: sorted(b.faults) for n, b in self.bmcs.items() if b.faults}})
            if req.method == "POST" and req.path == "/repair":
                await self.apply_faults({})
                return Response.of(200, {"repaired": True})
        except ValueError as exc:
            return Response.of(400, {"error": str(exc)})
        return Response.of(404, {"error": "unknown control endpoint"})

    async def stop(self) -> None:
        servers = [lst.server for lst in self._listeners.values()]
        if self._control_server is not None:
            servers.append(self._control_server)
        for s in servers:
            s.close()
        self._listeners.clear()
