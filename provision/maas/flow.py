"""Take PXE-armed hosts through MAAS: enlist with their harvested MACs, commission, deploy.

One asyncio task per host under a concurrency bound and a per-host deadline; each step is recorded
as it completes (`enlisted`, `commissioned`, `deployed`) and a failure becomes `failed` with a reason
(see `REMEDIATION`) and MAAS's own status message as evidence. Re-running picks each host up where it
is: a host already in MAAS is not enlisted again, and what happens to it next follows its MAAS status
(`COMMISSION`, `COMMISSIONING_NOW`, `COMMISSIONED`; any other status is `maas_state_conflict`).
BMC credentials are resolved once each, before the fan-out; one that cannot be fails only the hosts
that need it (`credential_unresolved`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.bmc.runner import last_inventory
from provision.errors import CredentialError
from provision.maas.client import MaasClient
from provision.maas.errors import MaasConflict, MaasError, MaasUnreachable, MaasValidationError
from provision.maas.machine import MaasMachine, MaasStatus
from provision.site.credentials import Login, login
from provision.site.endpoints import join_host_port
from provision.site.model import Host, Site
from provision.state import State, StateStore, reached

COMMAND = "maas-deploy"

# What a machine MAAS already knows needs, by its status (MAAS's NODE_STATUS semantics).
COMMISSION = {MaasStatus.NEW, MaasStatus.FAILED_COMMISSIONING, MaasStatus.FAILED_TESTING}  # (re)run it
COMMISSIONING_NOW = {MaasStatus.COMMISSIONING, MaasStatus.TESTING}  # running: wait for READY
COMMISSIONED = {  # on to allocation and deployment
    MaasStatus.READY,
    MaasStatus.ALLOCATED,
    MaasStatus.DEPLOYING,
    MaasStatus.DEPLOYED,
    MaasStatus.FAILED_DEPLOYMENT,
    MaasStatus.RELEASING,  # on its way back to READY (powering off,
    MaasStatus.DISK_ERASING,  # and erasing its disks where the region is set to)
}
RELEASING_NOW = {MaasStatus.RELEASING, MaasStatus.DISK_ERASING}

REMEDIATION = {
    "no_harvested_mac": "run `provision harvest-macs` for the host, then deploy again",
    "credential_unresolved": "fix the BMC credential the site file names for the host (env variable or vault entry)",
    "maas_enlist_rejected": "read MAAS's field errors: a MAC or hostname already in MAAS under another machine "
    "must be deleted there or fixed in the site file",
    "maas_commissioning_failed": "read the commissioning/testing script results in MAAS (machine > Commissioning), "
    "fix the hardware, then deploy again",
    "maas_deploy_failed": "read the installation log in MAAS (machine > Logs), then deploy again: the host is "
    "released and redeployed",
    "maas_release_failed": "MAAS could not release the machine after a failed deployment (power off or disk "
    "erasure failed): read its events in MAAS, mark it fixed there, then deploy again",
    "maas_power_error": "MAAS could not power the machine through its BMC: check the power parameters MAAS holds "
    "and that MAAS's rack controller reaches the BMC",
    "maas_state_conflict": "the machine's MAAS status does not allow this step: bring it to Ready in MAAS "
    "(mark fixed, exit rescue mode, wait for erasing, or commission it), then deploy again",
    "maas_timeout": "MAAS did not finish within the host deadline: look at the machine's events in MAAS, then "
    "deploy again with a longer --timeout if it was only slow",
    "maas_unreachable": "check that the MAAS region answers (URL, network, TLS); a request whose answer was lost "
    "may have taken effect: deploy again, it picks the host up where MAAS has it",
    "maas_error": "read the detail: MAAS refused or garbled the answer",
}


@dataclass(frozen=True)
class DeployOptions:
    distro_series: str = "jammy"
    architecture: str = "amd64/generic"
    concurrency: int = 32
    host_timeout_s: float = 1800.0
    poll_s: float = 5.0


@dataclass
class HostOutcome:
    host: str
    state: State
    reason: str | None = None
    detail: str = ""
    system_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def remediation(self) -> str:
        return REMEDIATION.get(self.reason, "") if self.reason else ""


class _Failed(Exception):
    def __init__(self, reason: str, detail: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.evidence = evidence or {}


def harvested_macs(store: StateStore, hostname: str) -> tuple[str | None, list[str]]:
    """The PXE MAC and every MAC recorded by the last successful MAC harvest of a host."""
    inventory = last_inventory(store, hostname)
    pxe = inventory.get("pxe_mac")
    macs = [str(m).lower() for m in (inventory.get("macs") or {}).values() if m]
    return (str(pxe).lower() if pxe else None), macs


def _evidence(machine: MaasMachine) -> dict[str, Any]:
    return {
        "system_id": machine.system_id,
        "status": int(machine.status),
        "status_name": machine.status_name,
        "status_message": machine.status_message,
        "power_state": machine.power_state,
    }


class MaasDeployer:
    def __init__(
        self,
        site: Site,
        store: StateStore,
        client: MaasClient,
        options: DeployOptions,
        progress: Callable[[HostOutcome], None] | None = None,
    ) -> None:
        self.site = site
        self.store = store
        self.client = client
        self.options = options
        self.progress = progress
        self._logins: dict[str, Login | CredentialError] = {}

    def _resolve_logins(self, hosts: Sequence[Host]) -> None:
        """Resolve each BMC credential these hosts name, once (a vault costs an ansible-vault run)."""
        for name in {h.bmc.credential for h in hosts} - self._logins.keys():
            try:
                self._logins[name] = login(self.site, name)
            except CredentialError as exc:
                self._logins[name] = exc

    def _login(self, host: Host) -> Login:
        found = self._logins.get(host.bmc.credential)
        if found is None:
            self._resolve_logins([host])
            found = self._logins[host.bmc.credential]
        if isinstance(found, CredentialError):
            raise _Failed("credential_unresolved", f"BMC credential {host.bmc.credential!r}: {found}")
        return found

    async def _wait(
        self, system_id: str, until: set[MaasStatus], busy: set[MaasStatus], deadline: float
    ) -> MaasMachine:
        while True:
            machine = await self.client.machine(system_id)
            if machine.status in until or machine.status not in busy:
                return machine
            if time.monotonic() > deadline:
                raise _Failed("maas_timeout", f"still {machine.status_name} at the deadline", _evidence(machine))
            await asyncio.sleep(self.options.poll_s)

    async def _enlist(self, host: Host, known: dict[str, MaasMachine]) -> tuple[MaasMachine, bool]:
        """The host's MAAS machine, and whether this run created it (with commissioning asked)."""
        if host.hostname in known:
            return known[host.hostname], False
        pxe, macs = harvested_macs(self.store, host.hostname)
        if pxe is None:
            raise _Failed("no_harvested_mac", "no PXE MAC recorded: run `provision harvest-macs` first")
        bmc_login = self._login(host)
        ordered = [pxe, *[m for m in macs if m != pxe]]
        try:
            created = await self.client.create_machine(
                hostname=host.hostname,
                macs=ordered,
                architecture=self.options.architecture,
                power_type="redfish",
                power_parameters={
                    "power_address": join_host_port(host.bmc.address, host.bmc.port),
                    "power_user": bmc_login.username,
                    "power_pass": bmc_login.password.reveal(),
                },
            )
        except MaasValidationError as exc:
            raise _Failed("maas_enlist_rejected", str(exc), {"fields": exc.fields}) from None
        return created, True

    async def _commissioned(self, machine: MaasMachine, created: bool, deadline: float) -> MaasMachine:
        """Take a machine that is not yet commissioned to READY: (re)commission it or wait for the
        commissioning that runs; a status that is neither (Broken, Rescue mode, ...) is a conflict."""
        status = machine.status
        just_created = created and status is MaasStatus.NEW  # its commissioning is starting
        if status in COMMISSION and not just_created:
            machine = await self.client.commission(machine.system_id)
        elif status not in COMMISSIONING_NOW and not just_created:
            raise _Failed(
                "maas_state_conflict",
                f"MAAS has the machine in status {machine.status_name!r} ({status.name}), which the bring-up "
                "does not commission or deploy from",
                _evidence(machine),
            )
        busy = {MaasStatus.NEW, *COMMISSIONING_NOW}
        machine = await self._wait(machine.system_id, {MaasStatus.READY}, busy, deadline)
        if machine.status is not MaasStatus.READY:
            power = "power" in machine.status_message.lower()
            reason = "maas_power_error" if power else "maas_commissioning_failed"
            raise _Failed(reason, f"{machine.status_name}: {machine.status_message}", _evidence(machine))
        return machine

    async def _one(self, host: Host, known: dict[str, MaasMachine]) -> HostOutcome:
        deadline = time.monotonic() + self.options.host_timeout_s
        name = host.hostname
        machine, created = await self._enlist(host, known)
        await self.store.atransition(name, State.enlisted, command=COMMAND, evidence=_evidence(machine))
        # MAAS is the truth about how far a machine got: commission only what has not been.
        if machine.status not in COMMISSIONED:
            machine = await self._commissioned(machine, created, deadline)
        await self.store.atransition(name, State.commissioned, command=COMMAND, evidence=_evidence(machine))
        if machine.status is MaasStatus.FAILED_DEPLOYMENT:
            machine = await self.client.release(machine.system_id)
        if machine.status in RELEASING_NOW:
            # MAAS powers the machine off (and may erase its disks) before it is READY again.
            machine = await self._wait(machine.system_id, {MaasStatus.READY}, RELEASING_NOW, deadline)
            if machine.status is not MaasStatus.READY:
                raise _Failed("maas_release_failed", f"{machine.status_name}: {machine.status_message}",
                              _evidence(machine))
        if machine.status is MaasStatus.READY:
            machine = await self.client.allocate(machine.system_id)
        if machine.status is MaasStatus.ALLOCATED:
            machine = await self.client.deploy(machine.system_id, distro_series=self.options.distro_series)
        machine = await self._wait(machine.system_id, {MaasStatus.DEPLOYED}, {MaasStatus.DEPLOYING}, deadline)
        if machine.status is not MaasStatus.DEPLOYED:
            reason = "maas_power_error" if "power" in machine.status_message.lower() else "maas_deploy_failed"
            raise _Failed(reason, f"{machine.status_name}: {machine.status_message}", _evidence(machine))
        await self.store.atransition(name, State.deployed, command=COMMAND, evidence=_evidence(machine))
        return HostOutcome(name, State.deployed, system_id=machine.system_id, evidence=_evidence(machine))

    async def _guarded(self, host: Host, known: dict[str, MaasMachine], gate: asyncio.Semaphore) -> HostOutcome:
        async with gate:
            try:
                outcome = await asyncio.wait_for(self._one(host, known), self.options.host_timeout_s + 30)
            except _Failed as exc:
                outcome = HostOutcome(host.hostname, State.failed, exc.reason, exc.detail, evidence=exc.evidence)
            except TimeoutError:
                outcome = HostOutcome(host.hostname, State.failed, "maas_timeout", "no answer within the host deadline")
            except MaasUnreachable as exc:
                outcome = HostOutcome(host.hostname, State.failed, "maas_unreachable", str(exc))
            except MaasConflict as exc:
                outcome = HostOutcome(host.hostname, State.failed, "maas_state_conflict", str(exc))
            except MaasError as exc:
                outcome = HostOutcome(host.hostname, State.failed, "maas_error", str(exc))
            if outcome.state is State.failed:
                await self.store.atransition(
                    host.hostname,
                    State.failed,
                    command=COMMAND,
                    reason=outcome.reason,
                    evidence={**outcome.evidence, "detail": outcome.detail},
                )
            if self.progress is not None:
                self.progress(outcome)
            return outcome

    def todo(self, hosts: Sequence[Host]) -> tuple[list[Host], list[HostOutcome]]:
        """Hosts that MAAS still has work for, and those already done or not ready for it."""
        work, skipped = [], []
        for host in hosts:
            record = self.store.get(host.hostname)
            resumable = record.state is State.failed and record.resume_from is not None and reached(
                record.resume_from, State.pxe_armed
            ) and not reached(record.resume_from, State.deployed)
            if record.state is not State.failed and reached(record.state, State.deployed):
                skipped.append(HostOutcome(host.hostname, record.state, detail="already deployed"))
            elif resumable or (record.state is not State.failed and reached(record.state, State.pxe_armed)):
                work.append(host)
            else:
                why = f"failed ({record.reason})" if record.state is State.failed else record.state.value
                skipped.append(HostOutcome(host.hostname, record.state, detail=f"not PXE-armed yet: {why}"))
        return work, skipped

    async def run(self, hosts: Sequence[Host]) -> list[HostOutcome]:
        work, skipped = self.todo(hosts)
        if not work:
            return skipped
        known = {m.hostname: m for m in await self.client.machines()}
        # ansible-vault runs in a thread: not on the event loop. Hosts MAAS already holds need no credential.
        await asyncio.to_thread(self._resolve_logins, [h for h in work if h.hostname not in known])
        gate = asyncio.Semaphore(self.options.concurrency)
        done = await asyncio.gather(*(self._guarded(h, known, gate) for h in work))
        return [*done, *skipped]
