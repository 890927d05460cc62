"""A MAAS region API simulator (REST API 2.0), faithful to the parts a bring-up uses; the region itself (the
machines and their actions) is sim/maas/region.py.

What it follows from MAAS: the API description at `describe/`, served without credentials, that MAAS's own
clients (python-libmaas, the CLI) read first (sim/maas/describe.py; requests are routed through the same
table); OAuth 1.0 PLAINTEXT authentication with the `consumer:token:secret` API key; a request without
credentials goes to a resource's anonymous handler where it has one (version, machine enlistment) and is
refused with 401 elsewhere, while wrong credentials are refused everywhere but `version/`; multipart or
urlencoded forms; `?op=` actions, an unknown one answered "Unrecognised signature"; the full machine
record (sim/maas/representation.py); form errors as 400 with a `{field: [message]}` JSON body, a
ValidationError without fields as plain text; actions not allowed in the machine's status as 409 Conflict.

    python -m sim.maas.server --address 127.0.2.1 --port 5240 --config FILE
    (API key in $BRINGUP_SIM_MAAS_API_KEY)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sim.addresses import check_loopback
from sim.maas.describe import API_ROOT, describe, resolve
from sim.maas.forms import BadRequest
from sim.maas.forms import form as _form
from sim.maas.machines import NodeStateViolation, ValidationFailed
from sim.maas.power import PowerError
from sim.maas.region import MaasSim
from sim.maas.representation import anon_machine_json, machine_json

__all__ = ["MaasSim", "PowerError", "serve"]

API = API_ROOT
MAAS_VERSION = "3.5.0"
MAX_REQUEST_BYTES = 16 << 20
Query = dict[str, list[str]]


class MaasApiHandler(BaseHTTPRequestHandler):
    """The MAAS API a bring-up uses, answered from `sim` (bound per server by `make_handler`)."""

    protocol_version = "HTTP/1.1"
    server_version = "maas-sim"
    # Headers and body go out as two writes: without TCP_NODELAY the body waits on the client's delayed ACK.
    disable_nagle_algorithm = True
    sim: MaasSim

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, ctype: str = "application/json") -> None:
        body = (json.dumps(payload) if ctype == "application/json" else str(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype if ctype != "text/plain" else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _dispatch(self, method: str) -> None:
        sim = self.sim
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        op: str | None = query["op"][0] if query.get("op") else None
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= MAX_REQUEST_BYTES:
            return self._send(413, "Request body too large", "text/plain")
        body = self.rfile.read(length) if length else b""
        path = url.path
        if path == f"{API}/describe/" and method == "GET":
            # MAAS makes the handlers' URIs absolute with the scheme and host the client asked by.
            return self._send(200, describe(f"http://{self.headers.get('Host', 'localhost')}"))
        if path == "/_sim/faults" and method == "POST":
            sim.faults = dict(json.loads(body or b"{}"))
            return self._send(200, sim.faults)
        found = resolve(path)
        if found is None:
            return self._send(404, "Not Found", "text/plain")
        resource, params = found
        header = self.headers.get("Authorization")
        if resource.auth is None or (header is None and resource.anon is not None):
            handler = resource.anon
        else:
            problem = sim.authorised(header)
            if problem:
                return self._send(401, problem, "text/plain")
            handler = resource.auth
        assert handler is not None
        action = handler.action(method, op)
        if action is None:
            return self._send(400, f"Unrecognised signature: method={method} op={op}", "text/plain")
        try:
            getattr(self, f"_{action.serves}")(params, query, body)
        except ValidationFailed as exc:
            self._send(400, exc.errors)
        except BadRequest as exc:
            self._send(400, str(exc), "text/plain")
        except NodeStateViolation as exc:
            self._send(409, str(exc), "text/plain")
        except KeyError:
            self._send(404, "No Machine matches the given query.", "text/plain")

    # The actions of sim/maas/describe.py's table, each named there by `serves`.

    def _version(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, {"version": MAAS_VERSION, "subversion": "sim", "capabilities": []})

    def _list_machines(self, params: dict[str, str], query: Query, body: bytes) -> None:
        with self.sim.lock:
            machines = list(self.sim.machines.values())
        for key, attr in (("hostname", "hostname"), ("id", "system_id")):
            if key in query:
                machines = [m for m in machines if getattr(m, attr) in query[key]]
        if "mac_address" in query:
            macs = {m.lower() for m in query["mac_address"]}
            machines = [m for m in machines if macs & set(m.macs)]
        self._send(200, [machine_json(m) for m in machines])

    def _create(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, machine_json(self.sim.create(_form(self, body))))

    def _create_anonymous(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, anon_machine_json(self.sim.create(_form(self, body), anonymous=True)))

    def _allocate(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, machine_json(self.sim.allocate(_form(self, body))))

    def _read_machine(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, machine_json(self.sim.get(params["system_id"])))

    def _delete_machine(self, params: dict[str, str], query: Query, body: bytes) -> None:
        machine = self.sim.get(params["system_id"])
        with self.sim.lock:
            self.sim.machines.pop(machine.system_id, None)
        self._send(204, "", "text/plain")

    def _query_power_state(self, params: dict[str, str], query: Query, body: bytes) -> None:
        self._send(200, {"state": self.sim.get(params["system_id"]).power_state})

    def _commission(self, params: dict[str, str], query: Query, body: bytes) -> None:
        machine = self.sim.get(params["system_id"])
        machine.enlisting = False  # an admin commissioning a machine enlisted anonymously accepts it
        self.sim.commission(machine)
        self._send(200, machine_json(machine))

    def _deploy(self, params: dict[str, str], query: Query, body: bytes) -> None:
        machine = self.sim.get(params["system_id"])
        self.sim.deploy(machine, _form(self, body))
        self._send(200, machine_json(machine))

    def _release(self, params: dict[str, str], query: Query, body: bytes) -> None:
        machine = self.sim.get(params["system_id"])
        self.sim.release(machine)
        self._send(200, machine_json(machine))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")


def make_handler(sim: MaasSim) -> type[BaseHTTPRequestHandler]:
    class Handler(MaasApiHandler):
        pass

    Handler.sim = sim
    return Handler


def serve(address: str, port: int, sim: MaasSim) -> ThreadingHTTPServer:
    check_loopback(address)
    server = ThreadingHTTPServer((address, port), make_handler(sim))
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default="127.0.2.1")
    parser.add_argument("--port", type=int, default=5240)
    parser.add_argument("--config", type=Path)
    args = parser.parse_args()
    key = os.environ.get("BRINGUP_SIM_MAAS_API_KEY", "")
    if key.count(":") != 2:
        raise SystemExit("BRINGUP_SIM_MAAS_API_KEY must hold consumer_key:token_key:token_secret")
    config = json.loads(args.config.read_text()) if args.config else {}
    server = serve(args.address, args.port, MaasSim(key, config))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    main()
