"""The MAAS simulator's region: its machines and what MAAS does when asked to enlist, commission, allocate,
deploy and release them (the HTTP side is sim/maas/server.py).

What it follows from MAAS: form errors as `{field: [message]}`; actions not allowed in the machine's status as
NodeStateViolation (409); an admin's enlistment commissions at once unless `commission=false`, an anonymous one
stays New (AnonMachinesHandler.create: commission defaults to false, and a machine enlisted anonymously goes
back to New after commissioning, for an admin to accept); on commission and deploy, the Redfish calls MAAS's
power driver makes to the machine's BMC; a `manual` machine is never powered or queried by MAAS, so its power
state stays "unknown" (drivers/power/manual.py: queryable = False; models/node.py: a manual machine can be
neither started nor stopped, a non-queryable one is recorded as POWER_STATE.UNKNOWN). Commissioning and
deployment take a configurable time; faults (commissioning or deployment failures per host) come from the
config file.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from typing import Any

from sim.maas.forms import power_parameters
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

_MAC = re.compile(r"^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$", re.I)
_script_sets = itertools.count(1)
# SCRIPT_STATUS (metadataserver/enum.py) of a commissioning: pending, passed, failed
PENDING, PASSED, FAILED = 0, 2, 3


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

    def create(self, form: dict[str, list[str]], *, anonymous: bool = False) -> Machine:
        """Enlist a machine from a create form: by an admin (commissions unless `commission=false`) or
        anonymously (stays New unless `commission=true`, and goes back to New after commissioning)."""
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
        params, problems = power_parameters(form, power_type)
        if problems:
            errors["power_parameters"] = problems
        again = self._enlisting_again(macs) if anonymous and not errors else None
        if again is not None:  # the same machine enlisting again (it PXE-booted twice): MAAS updates it
            with again.lock:
                again.architecture = arch
                if form.get("power_type") or params:
                    again.power_type, again.power_parameters = power_type, params
            return again
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
            machine = Machine(system_id_for(name), name, arch, macs, power_type, params, enlisting=anonymous)
            self.machines[machine.system_id] = machine
        default = "false" if anonymous else "true"
        if (form.get("commission") or [default])[0].lower() not in {"false", "0"}:
            self.commission(machine)
        return machine

    def _enlisting_again(self, macs: list[str]) -> Machine | None:
        """The New or Commissioning machine that has one of these MACs (AnonMachinesHandler.create's "MAC
        enlistment": an anonymous enlistment from a known NIC updates that machine instead of adding one)."""
        with self.lock:
            return next((m for m in self.machines.values()
                         if m.status in (NodeStatus.NEW, NodeStatus.COMMISSIONING) and set(m.macs) & set(macs)), None)

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
                if machine.generation == generation and machine.power_type != "manual":
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
            machine.commissioning_status, machine.commissioning_result_id = PENDING, next(_script_sets)

        def done() -> None:
            self._settle(machine, "commissioning_fails",
                         (NodeStatus.FAILED_COMMISSIONING, "Failed commissioning: 50-maas-01-commissioning failed"),
                         (NodeStatus.NEW, "") if machine.enlisting else (NodeStatus.READY, "Ready"))
            failed = machine.status is NodeStatus.FAILED_COMMISSIONING
            machine.commissioning_status = FAILED if failed else PASSED
            if machine.power_type != "manual":
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
            if machine.power_type != "manual":
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


