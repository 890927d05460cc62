"""Fan-out over a site's BMCs: bounded concurrency, a deadline per host, triage, and state records.

One bad host never stops or slows the others: each host runs in its own task under a semaphore and a
deadline, and every failure becomes a `failed` record with its reason and evidence. Records are written
by one writer thread (group commit) as soon as each host finishes a step, so a `kill -9` mid-run loses nothing
already recorded, and a re-run only touches hosts that still need the step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from provision.bmc.harvest import check, find_system, harvest
from provision.bmc.power import (
    PowerAction,
    PowerPolicy,
    arm_pxe_once,
    confirm_armed,
    power,
    power_state,
    reset,
    wait_power,
)
from provision.bmc.recorder import Recorder
from provision.bmc.triage import Failure, triage
from provision.redfish import ClientOptions, RedfishClient, tls_context
from provision.site import Host, Site
from provision.site.credentials import Login, login
from provision.site.endpoints import join_host_port
from provision.state import Change, HostRecord, State, StateStore

HARVEST = "harvest-macs"
PXE = "pxe-boot"


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
    # Hosts opening a BMC connection (TCP, TLS handshake, service root, login) at once. Without a
    # bound, 500 simultaneous handshakes finish together, late, and the first ones time out.
    open_concurrency: int = 64


@dataclass(frozen=True)
class HostResult:
    host: str
    ok: bool
    skipped: bool = False
    reason: str | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    remediation: str = ""


def needs_harvest(record: HostRecord) -> bool:
    if record.state is State.failed:
        return record.resume_from in (None, State.declared, State.bmc_reachable)
    return record.state in (State.declared, State.bmc_reachable)


def needs_pxe(record: HostRecord) -> bool:
    if record.state is State.failed:
        return record.resume_from is State.macs_harvested
    return record.state is State.macs_harvested


def base_url(host: Host) -> str:
    return f"https://{join_host_port(host.bmc.address, host.bmc.port)}"


class Fanout:
    def __init__(self, site: Site, store: StateStore, options: RunOptions | None = None) -> None:
        self.site = site
        self.store = store
        self.options = options or RunOptions()
        tls = site.spec.bmc_tls
        bundle = str((site.directory / tls.ca_bundle).resolve()) if tls.ca_bundle else None
        self._tls = tls_context(tls.verify, bundle)
        self._logins: dict[str, Login] = {}
        self._recorder: Recorder | None = None
        # Called with each host's result as it is known (skipped hosts included), for a progress bar.
        self.progress: Callable[[HostResult], None] | None = None
        self._opening: asyncio.Semaphore | None = None

    def _login(self, host: Host) -> Login:
        name = host.bmc.credential
        if name not in self._logins:
            self._logins[name] = login(self.site, name)
        return self._logins[name]

    def resolve_logins(self, hosts: Iterable[Host]) -> None:
        """Resolve every credential these hosts use, once, before any host is touched: a credential
        that does not resolve (unset variable, wrong vault password) is the run's error, raised here,
        not a failure recorded against every host."""
        for host in hosts:
            self._login(host)

    def client(self, host: Host) -> RedfishClient:
        return RedfishClient(base_url(host), self._login(host), tls=self._tls, options=self.options.client)

    @contextlib.asynccontextmanager
    async def session(self, host: Host) -> AsyncIterator[RedfishClient]:
        """An open client (connected, logged in), closed (session deleted) on the way out."""
        bmc = self.client(host)
        try:
            assert self._opening is not None
            async with self._opening:
                await bmc.open()
            yield bmc
        finally:
            await bmc.close()

    async def record(self, host: str, to: State, command: str, evidence: Any) -> None:
        assert self._recorder is not None
        await self._recorder.write(Change(host, to, command, evidence=evidence))

    async def record_failure(self, host: Host, command: str, failure: Failure) -> None:
        assert self._recorder is not None
        evidence = {**failure.evidence, "bmc": base_url(host), "detail": failure.detail}
        await self._recorder.write(Change(host.hostname, State.failed, command, failure.reason, evidence))

    async def _each(self, hosts: Iterable[Host], command: str | None,
                    work: Callable[[Host], Awaitable[dict[str, Any]]]) -> list[HostResult]:
        """Run `work` for every host, at most `concurrency` at once, each under its deadline. When
        `command` is set, failures are recorded in the state store under it."""
        opts = self.options
        sem = asyncio.Semaphore(opts.concurrency)

        async def one(host: Host) -> HostResult:
            async with sem:
                try:
                    async with asyncio.timeout(opts.host_timeout_s):
                        data = await work(host)
                    result = HostResult(host.hostname, True, data=data)
                except Exception as exc:  # every failure of one host is triaged, none escapes
                    failure = triage(exc, timeout_s=opts.host_timeout_s)
                    detail = failure.detail
                    if command is not None:
                        try:
                            await self.record_failure(host, command, failure)
                        except Exception as store_exc:  # the state store itself failed: say so, go on
                            detail += f" (NOT recorded in the state store: {type(store_exc).__name__}: {store_exc})"
                    result = HostResult(host.hostname, False, reason=failure.reason, detail=detail,
                                        data=failure.evidence, remediation=failure.remediation)
            self._report(result)
            return result

        hosts = list(hosts)
        # ansible-vault runs in a thread: the event loop may already serve other work.
        await asyncio.to_thread(self.resolve_logins, hosts)
        self._recorder = Recorder(self.store)
        self._opening = asyncio.Semaphore(opts.open_concurrency)
        try:
            return list(await asyncio.gather(*(one(h) for h in hosts)))
        finally:
            await self._recorder.close()
            self._recorder = None

    def _report(self, result: HostResult) -> None:
        if self.progress is not None:
            self.progress(result)

    # the three operations ------------------------------------------------------------------------

    def _split(self, hosts: list[Host], wanted: Callable[[HostRecord], bool]) -> tuple[list[Host], list[HostResult]]:
        todo: list[Host] = []
        skipped: list[HostResult] = []
        for host in hosts:
            rec = self.store.get(host.hostname)
            if wanted(rec):
                todo.append(host)
            else:
                why = f"{rec.state.value}" + (f" ({rec.reason})" if rec.reason else "")
                skipped.append(HostResult(host.hostname, rec.state is not State.failed, skipped=True,
                                          reason=rec.reason, detail=f"nothing to do: {why}",
                                          data=last_inventory(self.store, host.hostname)))
                self._report(skipped[-1])
        return todo, skipped

    async def harvest_macs(self, hosts: list[Host]) -> list[HostResult]:
        todo, skipped = self._split(hosts, needs_harvest)

        async def work(host: Host) -> dict[str, Any]:
            cls = self.site.host_class(host)
            async with self.session(host) as bmc:
                system = await find_system(bmc)
                await self.record(host.hostname, State.bmc_reachable, HARVEST,
                                  {"bmc": base_url(host), "system": system.path})
                inventory = await harvest(bmc, cls, system)
            check(inventory, cls)
            summary = inventory.summary()
            await self.record(host.hostname, State.macs_harvested, HARVEST, {
                "bmc": base_url(host), "inventory": summary, "pxe": {"source": inventory.pxe.source,
                                                                       "detail": inventory.pxe.detail},
                "cross_check": inventory.cross_check, "notes": list(inventory.notes), "raw": inventory.raw})
            return summary

        return await self._each(todo, HARVEST, work) + skipped

    def pxe_settings(self) -> tuple[str | None, PowerPolicy]:
        """The override mode to set (None: keep the BMC's) and the power policy: the run's options
        where given, else the site's policy."""
        policy = self.site.spec.policy
        mode = self.options.boot_mode or policy.pxe_boot_mode
        return (None if mode == "keep" else mode), self.options.power_policy or PowerPolicy(policy.pxe_power_policy)

    async def pxe_boot(self, hosts: list[Host]) -> list[HostResult]:
        todo, skipped = self._split(hosts, needs_pxe)
        opts = self.options
        boot_mode, power_policy = self.pxe_settings()
        # Read before the fan-out, in a thread: each is a history query and a JSON decode, which in
        # the host tasks would hold the event loop that 500 other BMC conversations need.
        inventories = await asyncio.to_thread(harvested, self.store, todo)

        async def work(host: Host) -> dict[str, Any]:
            async with self.session(host) as bmc:
                system = await find_system(bmc)
                state = power_state(system)
                on = state in ("On", "PoweringOn")
                # Off first: the reads waiting for Off show the override before any boot, so they
                # double as its check; otherwise the check is a read of its own before the reset.
                off_first = on and power_policy is PowerPolicy.off_on
                armed = await arm_pxe_once(bmc, system, boot_mode, verify=not off_first)
                resets: list[str] = []
                if on:
                    if power_policy is PowerPolicy.restart:
                        await reset(bmc, system, "ForceRestart")
                        resets.append("ForceRestart")
                    else:
                        await reset(bmc, system, "ForceOff")
                        resets.append("ForceOff")
                        off = await wait_power(bmc, system.path, "Off", opts.power_timeout_s, opts.poll_s, "ForceOff")
                        if "boot_armed" not in armed:
                            armed = confirm_armed(armed, off)
                        await reset(bmc, system, "On")
                        resets.append("On")
                else:
                    await reset(bmc, system, "On")
                    resets.append("On")
                after = await wait_power(bmc, system.path, "On", opts.power_timeout_s, opts.poll_s, resets[-1])
            boot_after = after.data.get("Boot") or {}
            inventory = inventories.get(host.hostname, {})
            armed.pop("boot_sent", None)
            evidence = {"bmc": base_url(host), **armed, "power_before": state, "resets": resets,
                        "power_state": power_state(after), "pxe_mac": inventory.get("pxe_mac"),
                        "pxe_nic": inventory.get("pxe_nic"),
                        "boot_after_power_on": {k: boot_after.get(k) for k in
                                                ("BootSourceOverrideTarget", "BootSourceOverrideEnabled")}}
            await self.record(host.hostname, State.pxe_armed, PXE, evidence)
            return evidence

        return await self._each(todo, PXE, work) + skipped

    async def power(self, hosts: list[Host], action: PowerAction) -> list[HostResult]:
        opts = self.options

        async def work(host: Host) -> dict[str, Any]:
            async with self.session(host) as bmc:
                system = await find_system(bmc)
                return await power(bmc, system, action, timeout_s=opts.power_timeout_s, poll_s=opts.poll_s)

        return await self._each(hosts, None, work)


def last_inventory(store: StateStore, hostname: str) -> dict[str, Any]:
    """The inventory summary of the host's latest successful harvest (empty when never harvested)."""
    for event in reversed(store.history(hostname)):
        if event.to_state is State.macs_harvested and isinstance(event.evidence, dict):
            inventory = event.evidence.get("inventory")
            return dict(inventory) if isinstance(inventory, dict) else {}
    return {}


def harvested(store: StateStore, hosts: Iterable[Host]) -> dict[str, dict[str, Any]]:
    return {h.hostname: inv for h in hosts if (inv := last_inventory(store, h.hostname))}
