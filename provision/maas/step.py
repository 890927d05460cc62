"""Take PXE-armed hosts through MAAS: enlist with their harvested MACs, commission, deploy.

Run by the step runner (bounded, a deadline per host); each stage is recorded as it completes
(`enlisted`, with the MAAS system_id as a host fact, `commissioned`, `deployed`) and a failure becomes
`failed` with a reason (the step table, provision/steps/pipeline.py) and MAAS's own status message as
evidence. Re-running picks each host up where it is: a host already in MAAS is not enlisted again, and
what happens to it next follows its MAAS status (`COMMISSION`, `COMMISSIONING_NOW`, `COMMISSIONED`;
any other status is `maas_state_conflict`).
A machine MAAS holds is the host's only by identity: one with the host's harvested PXE MAC among its
interfaces is adopted (whatever its hostname, which the evidence then names); one that merely has the
host's hostname but none of that MAC is another server, and the host fails `maas_identity_mismatch`
with nothing asked of that machine.
BMC credentials are resolved once each, before the fan-out; one that cannot be fails only the hosts
that need it (`credential_unresolved`).
Each action asked of MAAS (enlist, commission, allocate, deploy, release) is an intent on disk first, closed
by the host's next move (`provision.state.intents`); those a killed run left open are read back from MAAS
before this run acts (`reconcile.py`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from provision.errors import CredentialError
from provision.ethernet.triage import SwitchTriage
from provision.maas.client import MaasClient
from provision.maas.errors import MaasConflict, MaasError, MaasUnreachable, MaasValidationError
from provision.maas.machine import MaasMachine, MaasStatus
from provision.maas.reconcile import ENLIST, SYSTEM, reconcile_maas
from provision.site.credentials import Login, login
from provision.site.endpoints import join_host_port
from provision.site.model import Host, Site
from provision.state import HostRecord, State, StateStore, reached
from provision.state.facts import HostFacts
from provision.state.intents import open_intents
from provision.steps.pipeline import MAAS_DEPLOY
from provision.steps.runner import HostFailure, HostResult, Progress, Recording, RunLimits, Step

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
IDENTITY_REMEDIATION = (
    "the MAAS machine with the host's name has none of the host's harvested PXE MAC: if it is another server, "
    "rename or delete it in MAAS; if it is this server with different NICs, re-run `provision harvest-macs` for "
    "the host; then deploy again")


Asking = Callable[[str, str, str], Awaitable[None]]  # (action, system id, target): the intent, before the call


def identity_macs(machine: MaasMachine) -> set[str]:
    """The MACs MAAS holds for a machine: its interfaces' and its boot interface's."""
    return set(machine.macs) | ({machine.boot_mac} if machine.boot_mac else set())

@dataclass(frozen=True)
class DeployOptions:
    distro_series: str = "jammy"
    architecture: str = "amd64/generic"
    concurrency: int = 32
    host_timeout_s: float = 1800.0
    poll_s: float = 5.0


def _evidence(machine: MaasMachine) -> dict[str, Any]:
    return {
        "system_id": machine.system_id,
        "status": int(machine.status),
        "status_name": machine.status_name,
        "status_message": machine.status_message,
        "power_state": machine.power_state,
        "ip_addresses": list(machine.ip_addresses),
    }


class MaasDeployStep(Step):
    spec = MAAS_DEPLOY
    store: StateStore

    def __init__(self, site: Site, store: StateStore, client: MaasClient, options: DeployOptions) -> None:
        self.site = site
        self.store = store
        self.client = client
        self.options = options
        self._logins: dict[str, Login | CredentialError] = {}
        self._known: dict[str, MaasMachine] = {}
        self._by_mac: dict[str, MaasMachine] = {}
        self._facts: dict[str, HostFacts] = {}
        self._reconciled: dict[str, list[str]] = {}

    def limits(self) -> RunLimits:
        return RunLimits(self.options.concurrency, self.options.host_timeout_s)

    def deadline_s(self, host_timeout_s: float) -> float:
        return host_timeout_s + 30  # the polls stop at the host deadline: give the last answer time to land

    def skip_reason(self, record: HostRecord) -> str | None:
        if record.state is not State.failed and reached(record.state, State.deployed):
            return "already deployed"
        if super().skip_reason(record) is None:
            return None
        why = f"failed ({record.reason})" if record.state is State.failed else record.state.value
        return f"not PXE-armed yet: {why}"

    def triage(self, exc: BaseException, host_timeout_s: float) -> HostFailure:
        if isinstance(exc, HostFailure):
            return exc
        if isinstance(exc, TimeoutError):
            return HostFailure("maas_timeout", "no answer within the host deadline")
        if isinstance(exc, MaasUnreachable):
            return HostFailure("maas_unreachable", str(exc))
        if isinstance(exc, MaasConflict):
            return HostFailure("maas_state_conflict", str(exc))
        if isinstance(exc, MaasError):
            return HostFailure("maas_error", str(exc))
        return super().triage(exc, host_timeout_s)

    async def prepare(self, hosts: Sequence[Host]) -> None:
        machines = await self.client.machines()
        self._known = {m.hostname: m for m in machines}
        self._by_mac = {mac: m for m in machines for mac in identity_macs(m)}
        self._facts = await asyncio.to_thread(self.store.facts_many, [h.hostname for h in hosts])
        # ansible-vault runs in a thread: not on the event loop. Hosts MAAS already holds need no credential.
        fresh = [h for h in hosts if h.hostname not in self._known and self._pxe_mac(h) not in self._by_mac]
        await asyncio.to_thread(self._resolve_logins, fresh)

    async def reconcile(self, hosts: Sequence[Host]) -> None:
        names = [h.hostname for h in hosts]
        if await asyncio.to_thread(open_intents, self.store, system=SYSTEM, hosts=names, dead_only=True):
            machines = await self.client.machines()
            by_mac = {mac: m for m in machines for mac in identity_macs(m)}
            self._reconciled = await asyncio.to_thread(reconcile_maas, self.store, names, machines, by_mac,
                                                       command=self.command)

    def reconciled(self, host: str) -> tuple[str, ...]:
        return tuple(self._reconciled.get(host, ()))

    def _pxe_mac(self, host: Host) -> str | None:
        return (self._facts.get(host.hostname) or HostFacts()).pxe_mac

    def _identified(self, host: Host, pxe: str) -> tuple[MaasMachine | None, dict[str, Any]]:
        """The machine MAAS holds for the host, by its PXE MAC first and its hostname second (then only
        with that MAC among its interfaces), and how it was found; None when MAAS holds none."""
        by_mac = self._by_mac.get(pxe)
        if by_mac is not None:
            how: dict[str, Any] = {"adopted_by": "mac", "pxe_mac": pxe}
            if by_mac.hostname != host.hostname:
                how["maas_hostname"] = by_mac.hostname  # adopted under the name MAAS has it
            return by_mac, how
        named = self._known.get(host.hostname)
        if named is None:
            return None, {}
        raise HostFailure(
            "maas_identity_mismatch",
            f"MAAS machine {named.system_id} is named {host.hostname} but has none of its harvested PXE MAC "
            f"{pxe} (it has {', '.join(sorted(identity_macs(named))) or 'no MAC'}): another server's record",
            {"pxe_mac": pxe, "maas_system_id": named.system_id, "maas_hostname": named.hostname,
             "maas_macs": sorted(identity_macs(named)), "maas_boot_mac": named.boot_mac,
             "maas_status": named.status_name},
            remediation=IDENTITY_REMEDIATION,
        )

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
            raise HostFailure("credential_unresolved", f"BMC credential {host.bmc.credential!r}: {found}")
        return found

    async def _wait(
        self, system_id: str, until: set[MaasStatus], busy: set[MaasStatus], deadline: float
    ) -> MaasMachine:
        while True:
            machine = await self.client.machine(system_id)
            if machine.status in until or machine.status not in busy:
                return machine
            if time.monotonic() > deadline:
                raise HostFailure("maas_timeout", f"still {machine.status_name} at the deadline", _evidence(machine))
            await asyncio.sleep(self.options.poll_s)

    async def _enlist(self, host: Host, rec: Recording) -> tuple[MaasMachine, bool, dict[str, Any]]:
        """The host's MAAS machine, whether this run created it (with commissioning asked), and how a
        machine MAAS already held was identified as the host's."""
        facts = self._facts.get(host.hostname) or HostFacts()
        pxe, macs = facts.pxe_mac, list((facts.macs or {}).values())
        if pxe is None:  # without it no machine MAAS holds can be told to be this host
            raise HostFailure("no_harvested_mac", "no PXE MAC recorded: run `provision harvest-macs` first")
        held, how = self._identified(host, pxe)
        if held is not None:
            return held, False, how
        bmc_login = self._login(host)
        ordered = [pxe, *[m for m in macs if m != pxe]]
        await rec.intend(host.hostname, SYSTEM, pxe, ENLIST, "a machine commissioning")
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
            raise HostFailure("maas_enlist_rejected", str(exc), {"fields": exc.fields}) from None
        return created, True, {}

    async def _commissioned(self, machine: MaasMachine, created: bool, deadline: float,
                            asking: Asking) -> MaasMachine:
        """Take a machine that is not yet commissioned to READY: (re)commission it or wait for the
        commissioning that runs; a status that is neither (Broken, Rescue mode, ...) is a conflict."""
        status = machine.status
        just_created = created and status is MaasStatus.NEW  # its commissioning is starting
        if status in COMMISSION and not just_created:
            await asking("commission", machine.system_id, "Ready")
            machine = await self.client.commission(machine.system_id)
        elif status not in COMMISSIONING_NOW and not just_created:
            raise HostFailure(
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
            raise HostFailure(reason, f"{machine.status_name}: {machine.status_message}", _evidence(machine))
        return machine

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        try:
            return await self._work(host, rec)
        except HostFailure as failure:  # a boot failure carries the switch's view of the PXE NIC
            raise await self._switches.refine_known(host.hostname, self._facts, failure) from None

    @functools.cached_property
    def _switches(self) -> SwitchTriage:
        return SwitchTriage(self.site)

    async def _work(self, host: Host, rec: Recording) -> dict[str, Any]:
        deadline = time.monotonic() + self.options.host_timeout_s
        name = host.hostname
        machine, created, how = await self._enlist(host, rec)

        async def asking(action: str, system_id: str, target: str) -> None:
            await rec.intend(name, SYSTEM, system_id, action, target)

        await rec.move(name, State.enlisted, {**_evidence(machine), **how},
                       facts={"maas_system_id": machine.system_id})
        # MAAS is the truth about how far a machine got: commission only what has not been.
        if machine.status not in COMMISSIONED:
            machine = await self._commissioned(machine, created, deadline, asking)
        await rec.move(name, State.commissioned, _evidence(machine))
        machine = await self._deployed(machine, deadline, asking)
        facts = {"os_address": machine.ip_addresses[0]} if machine.ip_addresses else None
        await rec.move(name, State.deployed, _evidence(machine), facts=facts)
        return {"system_id": machine.system_id, **_evidence(machine), **how}

    async def _deployed(self, machine: MaasMachine, deadline: float, asking: Asking) -> MaasMachine:
        """A commissioned machine deployed: released first when an earlier deployment failed."""
        if machine.status is MaasStatus.FAILED_DEPLOYMENT:
            await asking("release", machine.system_id, "Ready")
            machine = await self.client.release(machine.system_id)
        if machine.status in RELEASING_NOW:
            # MAAS powers the machine off (and may erase its disks) before it is READY again.
            machine = await self._wait(machine.system_id, {MaasStatus.READY}, RELEASING_NOW, deadline)
            if machine.status is not MaasStatus.READY:
                raise HostFailure("maas_release_failed", f"{machine.status_name}: {machine.status_message}",
                                  _evidence(machine))
        if machine.status is MaasStatus.READY:
            await asking("allocate", machine.system_id, "Allocated")
            machine = await self.client.allocate(machine.system_id)
        if machine.status is MaasStatus.ALLOCATED:
            await asking("deploy", machine.system_id, "Deployed")
            machine = await self.client.deploy(machine.system_id, distro_series=self.options.distro_series)
        machine = await self._wait(machine.system_id, {MaasStatus.DEPLOYED}, {MaasStatus.DEPLOYING}, deadline)
        if machine.status is not MaasStatus.DEPLOYED:
            reason = "maas_power_error" if "power" in machine.status_message.lower() else "maas_deploy_failed"
            raise HostFailure(reason, f"{machine.status_name}: {machine.status_message}", _evidence(machine))
        return machine


async def deploy_hosts(site: Site, store: StateStore, client: MaasClient, options: DeployOptions,
                       hosts: Sequence[Host], progress: Progress | None = None) -> list[HostResult]:
    """`provision maas deploy`: the step on `hosts`, with the client opened and closed around it."""
    async with client:
        return await MaasDeployStep(site, store, client, options).run(hosts, progress)
