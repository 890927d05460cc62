"""The BMC steps of the step table: harvest-macs, pxe-boot and power, run by the one step runner.

Each opens a Redfish session per host (bounded: `open_concurrency` handshakes at once, since 500
simultaneous TLS handshakes finish together, late, and the first ones time out), does its work and
records what it saw; the runner owns concurrency, deadlines, recording and progress.
A harvested PXE MAC is a host's identity (DHCP reservations, MAAS adoption): one already recorded for
another host, or claimed by another host earlier in the same run, is not recorded again; the later host
fails `duplicate_pxe_mac` naming the holder (a BMC reporting another server's NICs).
pxe-boot and power write an intent before each boot override and reset they send (`provision.state.intents`),
closed by the host's record (pxe-boot's move) or the read-back (power); on start, both read back the BMCs
of the intents a dead run left open (`reconcile.py`) before acting.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.bmc.harvest import check_inventory, find_system, harvest
from provision.bmc.power import (
    RESET_TARGET,
    PowerAction,
    PowerPolicy,
    arm_pxe_once,
    confirm_armed,
    power,
    power_state,
    reset,
    wait_power,
)
from provision.bmc.reconcile import BOOT_OVERRIDE, SYSTEM, reconcile_bmcs, reset_action
from provision.bmc.triage import HostProblem, triage
from provision.ethernet.triage import SwitchTriage
from provision.redfish import ClientOptions, RedfishClient, RedfishRequestRejected, RedfishUnsupported
from provision.site import Host, Site
from provision.site.credentials import Login, login
from provision.site.endpoints import join_host_port
from provision.site.tls import tls_context
from provision.state import HostRecord, State, StateStore
from provision.state.facts import HostFacts, facts_from_inventory
from provision.state.identifiers import nic_mac
from provision.state.intents import Outcome, open_intents
from provision.steps.pipeline import HARVEST, POWER, PXE
from provision.steps.runner import HostFailure, HostResult, Progress, Recording, RunLimits, Step, run_step


@dataclass(frozen=True)
class RunOptions:
    concurrency: int = 128
    host_timeout_s: float = 120.0
    client: ClientOptions = field(default_factory=ClientOptions)
    power_timeout_s: float = 60.0
    poll_s: float = 1.0
    # pxe-boot's override mode (UEFI, Legacy, or keep) and what it does to servers already on; None:
    # the site's policy (`policy.pxe_boot_mode`, `policy.pxe_power_policy`).
    boot_mode: str | None = None
    power_policy: PowerPolicy | None = None
    open_concurrency: int = 64


def base_url(host: Host) -> str:
    return f"https://{join_host_port(host.bmc.address, host.bmc.port)}"


def inventory_view(facts: HostFacts) -> dict[str, Any]:
    """What a host's harvest learnt, shaped as the harvest's own summary (tables, exports)."""
    known = facts.known()
    view = {name: known[name] for name in HARVEST.writes if name in known and name != "redfish_system_id"}
    if "redfish_system_id" in known:
        view["system_id"] = known["redfish_system_id"]  # as the harvest's summary names it
    return view


class BmcStep(Step):
    """Shared by the BMC steps: credentials resolved once, TLS per the site, bounded session opening."""

    store: StateStore

    def __init__(self, site: Site, store: StateStore, options: RunOptions | None = None) -> None:
        self.site = site
        self.store = store
        self.options = options or RunOptions()
        tls = site.spec.bmc_tls
        bundle = str((site.directory / tls.ca_bundle).resolve()) if tls.ca_bundle else None
        self._tls = tls_context(tls.verify, bundle, service="BMC")
        self._logins: dict[str, Login] = {}
        self._opening = asyncio.Semaphore(self.options.open_concurrency)

    def limits(self) -> RunLimits:
        return RunLimits(self.options.concurrency, self.options.host_timeout_s)

    def _login(self, host: Host) -> Login:
        name = host.bmc.credential
        if name not in self._logins:
            self._logins[name] = login(self.site, name)
        return self._logins[name]

    def resolve_logins(self, hosts: Iterable[Host]) -> None:
        """Every credential these hosts use, once, before any host is touched: one that does not resolve
        (unset variable, wrong vault password) is the run's error, not a failure of every host."""
        for host in hosts:
            self._login(host)

    async def prepare(self, hosts: Sequence[Host]) -> None:
        # ansible-vault runs in a thread: the event loop may already serve other work.
        await asyncio.to_thread(self.resolve_logins, hosts)

    def client(self, host: Host) -> RedfishClient:
        return RedfishClient(base_url(host), self._login(host), tls=self._tls, options=self.options.client)

    @contextlib.asynccontextmanager
    async def session(self, host: Host) -> AsyncIterator[RedfishClient]:
        """An open client (connected, logged in), closed (session deleted) on the way out."""
        bmc = self.client(host)
        try:
            async with self._opening:
                await bmc.open()
            yield bmc
        finally:
            await bmc.close()

    def triage(self, exc: BaseException, host_timeout_s: float) -> HostFailure:
        return triage(exc, timeout_s=host_timeout_s)

    def failure_evidence(self, host: Host, failure: HostFailure) -> dict[str, Any]:
        return {**failure.evidence, "bmc": base_url(host), "detail": failure.detail}

    def skipped_data(self, host: Host, record: HostRecord) -> dict[str, Any]:
        return inventory_view(self.store.facts(host.hostname))

    reconciles = False  # the steps that change a BMC (pxe-boot, power on|off|cycle) read back a dead run's changes

    async def reconcile(self, hosts: Sequence[Host]) -> None:
        """Before acting: the BMC changes a dead run asked for and never recorded, read back and recorded."""
        if not self.reconciles:
            return
        dead = {i.host for i in await asyncio.to_thread(open_intents, self.store, system=SYSTEM, dead_only=True)}
        # Their credentials first: one that does not resolve is the run's error, before any BMC is read.
        await asyncio.to_thread(self.resolve_logins, [h for h in hosts if h.hostname in dead])
        self._reconciled = await reconcile_bmcs(self.store, hosts, self.session, command=self.command,
                                                concurrency=self.options.concurrency,
                                                timeout_s=self.options.host_timeout_s)

    def reconciled(self, host: str) -> tuple[str, ...]:
        return tuple(getattr(self, "_reconciled", {}).get(host, ()))

    async def reset(self, rec: Recording, host: Host, bmc: RedfishClient, system: Any, kind: str) -> None:
        """A reset, its intent on disk first."""
        await rec.intend(host.hostname, SYSTEM, base_url(host), reset_action(kind), RESET_TARGET[kind])
        await reset(bmc, system, kind)


DUPLICATE_REMEDIATION = (
    "two BMCs report the same PXE MAC: one of them reports another server's NICs (miscabled or mis-addressed "
    "BMC, a swapped motherboard, or a cloned BMC config); compare each BMC's serial and NICs with the servers, "
    "fix it, then re-run `provision harvest-macs` for both hosts")


class HarvestStep(BmcStep):
    spec = HARVEST

    async def prepare(self, hosts: Sequence[Host]) -> None:
        await super().prepare(hosts)
        running = {h.hostname for h in hosts}
        recorded = await asyncio.to_thread(self.store.facts_many, None)
        # Who holds each PXE MAC: the recorded hosts this run does not harvest again, then this run's
        # hosts as each is harvested (its earlier record is what the run replaces).
        self._pxe_holder = {f.pxe_mac: name for name, f in recorded.items() if f.pxe_mac and name not in running}

    def claim_pxe_mac(self, hostname: str, mac: str | None) -> None:
        """Record that `hostname` holds `mac`, or fail it (`duplicate_pxe_mac`) if another host does.
        Synchronous, so two hosts of one run cannot both claim a MAC between awaits."""
        mac = nic_mac(mac)
        if mac is None:  # none, or not a MAC: the facts' own check refuses it when it is written
            return
        holder = self._pxe_holder.setdefault(mac, hostname)
        if holder != hostname:
            raise HostFailure(
                "duplicate_pxe_mac",
                f"the BMC reports PXE MAC {mac}, which is {holder}'s: not recorded (one of the two BMCs reports "
                "another server's NICs)",
                {"pxe_mac": mac, "other_host": holder}, remediation=DUPLICATE_REMEDIATION)

    @functools.cached_property
    def _switches(self) -> SwitchTriage:
        return SwitchTriage(self.site)

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        cls = self.site.host_class(host)
        async with self.session(host) as bmc:
            system = await find_system(bmc)
            await rec.move(host.hostname, State.bmc_reachable, {"bmc": base_url(host), "system": system.path})
            inventory = await harvest(bmc, cls, system)
        try:
            check_inventory(inventory, cls)
        except HostProblem as problem:  # a link failure carries the switch's view, its reason made precise
            raise await self._switches.refine(host.hostname, inventory.summary().get("pxe_mac"), problem) from None
        summary = inventory.summary()
        self.claim_pxe_mac(host.hostname, summary.get("pxe_mac"))
        evidence = {"bmc": base_url(host), "inventory": summary,
                    "pxe": {"source": inventory.pxe.source, "detail": inventory.pxe.detail},
                    "cross_check": inventory.cross_check, "notes": list(inventory.notes), "raw": inventory.raw}
        await rec.move(host.hostname, State.macs_harvested, evidence, facts=facts_from_inventory(summary))
        return summary


class PxeStep(BmcStep):
    spec = PXE
    reconciles = True

    @functools.cached_property
    def _switches(self) -> SwitchTriage:
        return SwitchTriage(self.site)

    def pxe_settings(self) -> tuple[str | None, PowerPolicy]:
        """The override mode to set (None: keep the BMC's) and the power policy: the run's options
        where given, else the site's policy."""
        policy = self.site.spec.policy
        mode = self.options.boot_mode or policy.pxe_boot_mode
        return (None if mode == "keep" else mode), self.options.power_policy or PowerPolicy(policy.pxe_power_policy)

    async def prepare(self, hosts: Sequence[Host]) -> None:
        await super().prepare(hosts)
        # One query, in a thread: in the host tasks it would hold the loop 500 BMC conversations need.
        self._facts = await asyncio.to_thread(self.store.facts_many, [h.hostname for h in hosts])

    async def _power_cycle(self, rec: Recording, host: Host, bmc: RedfishClient, system: Any, armed: dict[str, Any],
                           on: bool, policy: PowerPolicy) -> tuple[dict[str, Any], list[str]]:
        opts = self.options
        resets: list[str] = []
        if on and policy is PowerPolicy.restart:
            await self.reset(rec, host, bmc, system, "ForceRestart")
            resets.append("ForceRestart")
        elif on:
            await self.reset(rec, host, bmc, system, "ForceOff")
            resets.append("ForceOff")
            off = await wait_power(bmc, system.path, "Off", opts.power_timeout_s, opts.poll_s, "ForceOff")
            if "boot_armed" not in armed:
                armed = confirm_armed(armed, off)
            await self.reset(rec, host, bmc, system, "On")
            resets.append("On")
        else:
            await self.reset(rec, host, bmc, system, "On")
            resets.append("On")
        return armed, resets

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        try:
            return await self._boot(host, rec)
        except HostProblem as problem:  # a boot failure carries the switch's view of the PXE NIC
            raise await self._switches.refine_known(host.hostname, self._facts, problem) from None

    async def _boot(self, host: Host, rec: Recording) -> dict[str, Any]:
        boot_mode, policy = self.pxe_settings()
        opts = self.options
        async with self.session(host) as bmc:
            system = await find_system(bmc)
            state = power_state(system)
            on = state in ("On", "PoweringOn")
            # Off first: the reads waiting for Off show the override before any boot, so they double as
            # its check; otherwise the check is a read of its own before the reset.
            off_first = on and policy is PowerPolicy.off_on
            override = "Pxe/Once" + (f"/{boot_mode}" if boot_mode else "")
            await rec.intend(host.hostname, SYSTEM, base_url(host), BOOT_OVERRIDE, override)
            armed = await arm_pxe_once(bmc, system, boot_mode, verify=not off_first)
            armed, resets = await self._power_cycle(rec, host, bmc, system, armed, on, policy)
            after = await wait_power(bmc, system.path, "On", opts.power_timeout_s, opts.poll_s, resets[-1])
        boot_after = after.data.get("Boot") or {}
        facts = self._facts.get(host.hostname) or HostFacts()
        armed.pop("boot_sent", None)
        evidence = {"bmc": base_url(host), **armed, "power_before": state, "resets": resets,
                    "power_state": power_state(after), "pxe_mac": facts.pxe_mac, "pxe_nic": facts.pxe_nic,
                    "boot_after_power_on": {k: boot_after.get(k) for k in
                                            ("BootSourceOverrideTarget", "BootSourceOverrideEnabled")}}
        await rec.move(host.hostname, State.pxe_armed, evidence)
        return evidence


class PowerStep(BmcStep):
    spec = POWER

    def __init__(self, site: Site, store: StateStore, action: PowerAction, options: RunOptions | None = None) -> None:
        super().__init__(site, store, options)
        self.action = action
        self.reconciles = action is not PowerAction.status

    @property
    def command(self) -> str:
        return f"power {self.action.value}"

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        opts = self.options
        name = host.hostname

        async def asking(kind: str) -> None:
            # power() asks for a second reset only once the first one's read-back showed it done
            await rec.settle(name, Outcome.confirmed, {"power_state": RESET_TARGET[kind]})
            await rec.intend(name, SYSTEM, base_url(host), reset_action(kind), RESET_TARGET[kind])

        async with self.session(host) as bmc:
            system = await find_system(bmc)
            try:
                done = await power(bmc, system, self.action, timeout_s=opts.power_timeout_s, poll_s=opts.poll_s,
                                   asking=asking)
            except HostProblem as problem:  # the read-back shows the reset did not take
                await rec.settle(name, Outcome.failed, {"reason": problem.reason, **problem.evidence})
                raise
            except (RedfishRequestRejected, RedfishUnsupported) as exc:  # refused: the BMC did nothing
                await rec.settle(name, Outcome.failed, {"refused": str(exc)})
                raise
            # Anything else (no answer, the deadline) leaves the intent open: the next run reads the BMC.
        await rec.settle(name, Outcome.confirmed, {"power_state": done["power_state"]})
        return done

    async def run(self, hosts: Sequence[Host], progress: Progress | None = None) -> list[HostResult]:
        """Every given host, whatever its state; nothing is recorded (power is no lifecycle move)."""
        return await run_step(self, self.store, hosts, self.limits(), record_failures=False, progress=progress,
                              select=False)
