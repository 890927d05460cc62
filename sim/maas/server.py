"""A MAAS region API simulator (REST API 2.0), faithful to the parts a bring-up uses.

What it follows from MAAS: OAuth 1.0 PLAINTEXT authentication with the `consumer:token:secret` API
key; multipart or urlencoded forms; `?op=` actions; numeric `status` with `status_name` and
`status_message`; form errors as 400 with a `{field: [message]}` JSON body; actions not allowed in the
machine's status as 409 Conflict; and, on commission and deploy, the same Redfish calls MAAS's power
driver makes to the machine's BMC (list Systems, GET the system for its ETag, PATCH a one-time PXE
boot with `If-Match`, POST `ComputerSystem.Reset`). Commissioning and deployment take a configurable
time; faults (commissioning or deployment failures per host) come from the config file.

    python -m sim.maas.server --address 127.0.2.1 --port 5240 --config FILE
    (API key in $BRINGUP_SIM_MAAS_API_KEY)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import threading
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sim.addresses import check_loopback
from sim.maas.forms import form as _form
from sim.maas.machines import (
    COMMISSION_FROM,
    DEPLOY_FROM,
    DEPLOY_SUBNET,
    RELEASE_FROM,
    STATUS_NAMES,
    Machine,
    NodeStateViolation,
    NodeStatus,
    ValidationFailed,
    system_id_for,
)
from sim.maas.power import PowerError, redfish_power_on
from sim.maas.pxe import PxeNetwork

__all__ = ["MaasSim", "PowerError", "serve"]

API = "/MAAS/api/2.0"
MAAS_VERSION = "3.5.0"
_MAC = re.compile(r"^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$", re.I)


class MaasSim:
    def __init__(self, api_key: str, config: dict[str, Any]) -> None:
        self.consumer_key, self.token_key, self.token_secret = api_key.split(":")
        self.commission_s = float(config.get("commission_seconds", 2.0))
        self.deploy_s = float(config.get("deploy_seconds", 3.0))
        self.release_s = float(config.get("release_seconds", 1.0))
        self.faults: dict[str, str] = dict(config.get("faults", {}))
        self.machines: dict[str, Machine] = {}
        self.lock = threading.Lock()
        self.power_on: Callable[[dict[str, str]], None] = redfish_power_on
        self.pxe = PxeNetwork.from_config(config)  # the switches' say on whether a PXE boot gets anywhere

    # auth ----------------------------------------------------------------------------------------

    def authorised(self, header: str | None) -> str | None:
        """None when the OAuth header is valid, else MAAS's error text."""
        if not header or not header.startswith("OAuth "):
            return "Authorization Error: No OAuth header"
        params = dict(
            (k.strip(), urllib.parse.unquote(v.strip().strip('"')))
            for k, _, v in (p.partition("=") for p in header[6:].split(","))
        )
        if params.get("oauth_signature_method") != "PLAINTEXT":
            return "Authorization Error: Unsupported signature method"
        if params.get("oauth_consumer_key") != self.consumer_key or params.get("oauth_token") != self.token_key:
            return "Authorization Error: Invalid access token: " + params.get("oauth_token", "")
        if params.get("oauth_signature") != f"&{self.token_secret}":
            return "Authorization Error: Invalid signature"
        if "oauth_nonce" not in params or "oauth_timestamp" not in params:
            return "Authorization Error: Missing nonce or timestamp"
        return None

    # actions -------------------------------------------------------------------------------------

    def get(self, system_id: str) -> Machine:
        with self.lock:
            machine = self.machines.get(system_id)
        if machine is None:
            raise KeyError(system_id)
        return machine

    def create(self, form: dict[str, list[str]]) -> Machine:
        errors: dict[str, list[str]] = {}
        hostname = (form.get("hostname") or [""])[0]
        macs = [m.lower().replace("-", ":") for m in form.get("mac_addresses", [])]
        arch = (form.get("architecture") or [""])[0]
        power_type = (form.get("power_type") or ["manual"])[0]
        if not arch:
            errors["architecture"] = ["Architecture must be defined for installable nodes."]
        if not macs:
            errors["mac_addresses"] = ["This field is required."]
        elif not all(_MAC.match(m) for m in macs):
            errors["mac_addresses"] = ["One or more MAC addresses is invalid."]
        if power_type not in {"redfish", "ipmi", "manual"}:
            errors["power_type"] = [f"Select a valid choice. {power_type} is not one of the available choices."]
        prefix = "power_parameters_"
        params = {k.removeprefix(prefix): v[0] for k, v in form.items() if k.startswith(prefix)}
        if power_type == "redfish" and not params.get("power_address"):
            errors["power_parameters"] = ["power_address: This field is required."]
        with self.lock:
            for other in self.machines.values():
                if hostname and other.hostname == hostname:
                    errors.setdefault("hostname", []).append(f"Node with hostname '{hostname}' already exists.")
                taken = set(other.macs) & set(macs)
                if taken:
                    errors.setdefault("mac_addresses", []).append(
                        f"{sorted(taken)[0]} is already in use on {other.hostname}."
                    )
            if errors:
                raise ValidationFailed(errors)
            name = hostname or f"node-{len(self.machines) + 1}"
            machine = Machine(system_id_for(name), name, arch, macs, power_type, params)
            self.machines[machine.system_id] = machine
        commission = (form.get("commission") or ["true"])[0].lower() not in {"false", "0"}
        if commission:
            self.commission(machine)
        return machine

    def _run_later(self, machine: Machine, delay: float, generation: int, finish: Any) -> None:
        def run() -> None:
            time.sleep(delay)
            with machine.lock:
                if machine.generation == generation:
                    finish()

        threading.Thread(target=run, daemon=True).start()

    def _power_then(self, machine: Machine, generation: int, failed: NodeStatus, delay: float, done: Any) -> None:
        def run() -> None:
            try:
                if machine.power_type == "redfish":
                    self.power_on(machine.power_parameters)
            except PowerError as exc:
                with machine.lock:
                    if machine.generation == generation:
                        machine.status, machine.status_message = failed, str(exc)
                return
            with machine.lock:
                if machine.generation == generation:
                    machine.power_state = "on"
                operation = STATUS_NAMES[machine.status]
            if machine.macs and not self.pxe.boots(machine.macs[0]):  # never heard from: its status expires
                expire = partial(self._expire, machine, failed, operation)
                self._run_later(machine, self.pxe.boot_timeout_s, generation, expire)
                return
            self._run_later(machine, delay, generation, done)

        threading.Thread(target=run, daemon=True).start()

    def _expire(self, machine: Machine, failed: NodeStatus, operation: str) -> None:
        machine.status, machine.status_message = failed, self.pxe.timed_out(operation)

    @staticmethod
    def _begin(machine: Machine, action: str, allowed: set[NodeStatus], status: NodeStatus, message: str) -> int:
        """Under the machine's lock: refuse `action` unless its status allows it, else start it; its generation."""
        if machine.status not in allowed:
            raise NodeStateViolation(f"Cannot {action} node because node is in the {machine.status.name} state.")
        machine.generation += 1
        machine.status, machine.status_message = status, message
        return machine.generation

    def _settle(self, machine: Machine, fault: str, failed: tuple[NodeStatus, str],
                succeeded: tuple[NodeStatus, str]) -> None:
        """End an action: `failed` (status, message) when the host is set to fail it with `fault`, else `succeeded`."""
        machine.status, machine.status_message = failed if self.faults.get(machine.hostname) == fault else succeeded

    def commission(self, machine: Machine) -> None:
        with machine.lock:
            generation = self._begin(machine, "commission", COMMISSION_FROM, NodeStatus.COMMISSIONING, "Commissioning")

        def done() -> None:
            self._settle(machine, "commissioning_fails",
                         (NodeStatus.FAILED_COMMISSIONING, "Failed commissioning: 50-maas-01-commissioning failed"),
                         (NodeStatus.READY, "Ready"))
            machine.power_state = "off"

        self._power_then(machine, generation, NodeStatus.FAILED_COMMISSIONING, self.commission_s, done)

    def allocate(self, form: dict[str, list[str]]) -> Machine:
        wanted = form["system_id"][0] if form.get("system_id") else None
        name = form["name"][0] if form.get("name") else None
        with self.lock:
            candidates = [
                m
                for m in self.machines.values()
                if m.status is NodeStatus.READY
                and (wanted is None or m.system_id == wanted)
                and (name is None or m.hostname == name)
            ]
        if not candidates:
            raise NodeStateViolation("No machine available matching the given constraints.")
        machine = candidates[0]
        with machine.lock:
            machine.status, machine.owner, machine.status_message = NodeStatus.ALLOCATED, "admin", "Allocated"
        return machine

    def deploy(self, machine: Machine, form: dict[str, list[str]]) -> None:
        with machine.lock:
            generation = self._begin(machine, "deploy", DEPLOY_FROM, NodeStatus.DEPLOYING, "Deploying")
            machine.owner = machine.owner or "admin"
            machine.osystem = (form.get("osystem") or ["ubuntu"])[0]
            machine.distro_series = (form.get("distro_series") or ["jammy"])[0]

        def done() -> None:
            self._settle(machine, "deploy_fails",
                         (NodeStatus.FAILED_DEPLOYMENT,
                          "Installation failed (refer to the installation log for more information)."),
                         (NodeStatus.DEPLOYED, "Deployed"))
            if machine.status is NodeStatus.DEPLOYED and machine.interface_ids:  # (under the machine's lock)
                index = machine.interface_ids[0] % (DEPLOY_SUBNET.num_addresses - 2) + 1
                machine.ip_addresses = [str(DEPLOY_SUBNET[index])]

        self._power_then(machine, generation, NodeStatus.FAILED_DEPLOYMENT, self.deploy_s, done)

    def release(self, machine: Machine) -> None:
        with machine.lock:
            # As MAAS does: RELEASING while the machine is powered off (and its disks erased, where
            # the region says so), READY afterwards.
            generation = self._begin(machine, "release", RELEASE_FROM, NodeStatus.RELEASING, "Releasing")
            machine.owner = None
            machine.osystem = machine.distro_series = ""
            machine.ip_addresses = []

        fault = self.faults.get(machine.hostname)

        def done() -> None:
            machine.power_state = "off"
            if fault == "release_fails":
                machine.status, machine.status_message = NodeStatus.FAILED_RELEASING, "Failed to release"
            elif fault in ("erase_disks", "erase_fails"):  # a region set to erase disks on release
                machine.status, machine.status_message = NodeStatus.DISK_ERASING, "Erasing disks"
                self._run_later(machine, self.release_s, generation, erased)
            else:
                machine.status, machine.status_message = NodeStatus.READY, "Released"

        def erased() -> None:
            if fault == "erase_fails":
                machine.status, machine.status_message = NodeStatus.FAILED_DISK_ERASING, "Failed to erase disks"
            else:
                machine.status, machine.status_message = NodeStatus.READY, "Released"

        self._run_later(machine, self.release_s, generation, done)


class MaasApiHandler(BaseHTTPRequestHandler):
    """The MAAS API a bring-up uses, answered from `sim` (bound per server by `make_handler`)."""

    protocol_version = "HTTP/1.1"
    server_version = "maas-sim"
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
        op = (query.get("op") or [""])[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = url.path
        if path == f"{API}/version/" and method == "GET":
            return self._send(200, {"version": MAAS_VERSION, "subversion": "sim", "capabilities": []})
        if path == "/_sim/faults" and method == "POST":
            sim.faults = dict(json.loads(body or b"{}"))
            return self._send(200, sim.faults)
        problem = sim.authorised(self.headers.get("Authorization"))
        if problem:
            return self._send(401, problem, "text/plain")
        try:
            self._route(method, path, op, query, body)
        except ValidationFailed as exc:
            self._send(400, exc.errors)
        except NodeStateViolation as exc:
            self._send(409, str(exc), "text/plain")
        except KeyError:
            self._send(404, "No Machine matches the given query.", "text/plain")

    def _route(self, method: str, path: str, op: str, query: dict[str, list[str]], body: bytes) -> None:
        if path == f"{API}/machines/":
            return self._machines(method, op, query, body)
        m = re.fullmatch(rf"{API}/machines/([^/]+)/", path)
        if m is None:
            return self._send(404, "Not Found", "text/plain")
        return self._machine(self.sim.get(m.group(1)), method, op, body)

    def _machines(self, method: str, op: str, query: dict[str, list[str]], body: bytes) -> None:
        """`/machines/`: list (filtered by hostname, id or MAC), create, allocate."""
        sim = self.sim
        if method == "GET":
            with sim.lock:
                machines = list(sim.machines.values())
            for key, attr in (("hostname", "hostname"), ("id", "system_id")):
                if key in query:
                    machines = [m for m in machines if getattr(m, attr) in query[key]]
            if "mac_address" in query:
                macs = {m.lower() for m in query["mac_address"]}
                machines = [m for m in machines if macs & set(m.macs)]
            return self._send(200, [m.to_json() for m in machines])
        if method == "POST" and op == "":
            return self._send(200, sim.create(_form(self, body)).to_json())
        if method == "POST" and op == "allocate":
            return self._send(200, sim.allocate(_form(self, body)).to_json())
        return self._send(400, f"Unrecognised signature: method={method} op={op}", "text/plain")

    def _machine(self, machine: Machine, method: str, op: str, body: bytes) -> None:
        """`/machines/<system_id>/`: read, power state, delete, and the commission/deploy/release actions."""
        sim = self.sim
        if method == "GET" and op == "":
            return self._send(200, machine.to_json())
        if method == "GET" and op == "query_power_state":
            return self._send(200, {"state": machine.power_state})
        if method == "DELETE":
            with sim.lock:
                sim.machines.pop(machine.system_id, None)
            return self._send(204, "", "text/plain")
        if method == "POST" and op == "commission":
            sim.commission(machine)
        elif method == "POST" and op == "deploy":
            sim.deploy(machine, _form(self, body))
        elif method == "POST" and op == "release":
            sim.release(machine)
        else:
            return self._send(400, f"Unrecognised signature: method={method} op={op}", "text/plain")
        return self._send(200, machine.to_json())

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
