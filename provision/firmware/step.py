"""`provision firmware inventory`: every BMC's firmware components and BIOS attributes, judged against the host
class's baseline, recorded in the `host_firmware` table.

A host off its baseline fails `firmware_drift` (or `bios_drift` when only BIOS attributes differ) with every
difference as evidence: the component, the version seen, the one wanted. A host that failed for drift and is
found on its baseline again (fixed by hand, or by `apply`) re-enters the flow where it left it, at `configured`
at the latest: health and burn-in earn golden again. A part the BMC does not serve is unknown: recorded, no
failure, and the golden gate (gate.py) keeps the host out of golden meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from provision.bmc.reconcile import line
from provision.bmc.step import BmcStep, base_url
from provision.firmware.drift import Judgement, judge
from provision.firmware.read import HostFirmware, read_firmware
from provision.firmware.reasons import ACTIONS, BASELINE_REASONS, DRIFT_REASONS
from provision.firmware.table import FirmwareRow, read_rows, write_rows
from provision.site import Host
from provision.state import State
from provision.state.intents import Intent, open_intents, reconcile
from provision.state.lifecycle import RANK
from provision.steps.pipeline import FIRMWARE_INVENTORY
from provision.steps.runner import HostFailure, HostResult, Progress, Recording

FLUSH_ROWS = 64


def reentry(resume_from: State | None) -> State:
    """Where a host back on its baseline re-enters the flow: where it failed, at configured at the latest."""
    if resume_from is None or RANK[resume_from] > RANK[State.configured]:
        return State.configured
    return resume_from if resume_from is not State.declared else State.bmc_reachable


def drift_failure(judged: Judgement, evidence: dict[str, Any]) -> HostFailure:
    drifts = (*judged.firmware, *judged.bios)
    reason = "firmware_drift" if judged.firmware else "bios_drift"
    shown = "; ".join(d.line() for d in drifts[:4]) + (f" (+{len(drifts) - 4} more)" if len(drifts) > 4 else "")
    what = "firmware" if judged.firmware else "BIOS"
    return HostFailure(reason, f"off its {what} baseline: {shown}", {**evidence, "drift": judged.as_json()})


def _found(action: str, on_baseline: bool, jobs: list[dict[str, Any]]) -> str:
    """What the BMC shows of a dead run's change: done, waiting in its job queue for a reboot, or not there."""
    if on_baseline:
        return "the BMC shows the host on its baseline: not changed again"
    kind = "FirmwareUpdate" if action == "firmware_update" else "BIOSConfiguration"
    job = next((j for j in jobs if j.get("type") == kind and j.get("state") == "Scheduled"), None)
    if job is not None:
        return (f"the BMC holds it for the next reboot (job {job.get('id')} Scheduled): the next apply reboots the "
                "host without sending it again")
    return "the BMC shows the host still off its baseline: the next apply changes it"


class InventoryStep(BmcStep):
    spec = FIRMWARE_INVENTORY
    _rows: list[FirmwareRow]
    closed_intents: tuple[str, ...] = ()  # hosts whose dead apply intents this run closed
    said: dict[str, tuple[str, ...]]  # host -> what this run found of a dead apply's changes, a line each

    async def prepare(self, hosts: Sequence[Host]) -> None:
        await super().prepare(hosts)
        self._rows = []
        self.said = {}

    async def flush(self) -> None:
        """The rows gathered so far, in one transaction (one per host cost 512 fsyncs at Imbue's scale)."""
        rows, self._rows = self._rows, []
        await asyncio.to_thread(write_rows, self.store, rows)

    async def run(self, hosts: Sequence[Host], progress: Progress | None = None) -> list[HostResult]:
        try:
            results = await super().run(hosts, progress)
        finally:
            if getattr(self, "_rows", None):
                await self.flush()
        read = [r.host for r in results if not r.skipped and (r.ok or r.reason in DRIFT_REASONS)]
        self.said = await asyncio.to_thread(self.reconcile_dead, read)
        self.closed_intents = tuple(sorted(self.said))
        return [dataclasses.replace(r, reconciled=self.said[r.host]) if r.host in self.said else r for r in results]

    def reconcile_dead(self, hosts: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Close, with what the BMC showed now, the changes a killed apply had asked of the BMCs just read; what
        was found, a line per change, by host."""
        if not hosts:
            return {}
        rows = read_rows(self.store, hosts)
        done: dict[str, list[Intent]] = {}
        for intent in open_intents(self.store, system="bmc", hosts=hosts, dead_only=True):
            if intent.action in ACTIONS:
                done.setdefault(intent.host, []).append(intent)
        said: dict[str, tuple[str, ...]] = {}
        for host, intents in done.items():
            on = bool(rows[host].on_baseline) if host in rows else False
            jobs = (rows[host].inventory.get("jobs") or []) if host in rows else []
            said[host] = tuple(line(i, _found(i.action, on, jobs)) for i in intents)
            reconcile(self.store, host, intents, {"on_baseline": on}, command=self.command, lines=said[host])
        return said

    def judged(self, host: Host, found: HostFirmware) -> Judgement:
        return judge(self.site.host_class(host).firmware, found.components, found.bios)

    async def record(self, host: Host, found: HostFirmware, judged: Judgement, rec: Recording) -> dict[str, Any]:
        """The row, then the lifecycle: drift fails the host, a drifted host back on baseline re-enters."""
        row = FirmwareRow(host.hostname, time.time(), found.as_json(), judged.as_json(), judged.on_baseline,
                          rec.command)
        self._rows.append(row)
        if len(self._rows) >= FLUSH_ROWS:
            await self.flush()
        evidence = {"bmc": base_url(host), "components": len(found.components or ()), "notes": list(found.notes)}
        record = self.store.get(host.hostname)
        if judged.firmware or judged.bios:
            if record.state is State.failed and record.reason not in BASELINE_REASONS:
                return {**evidence, "drift": judged.as_json(), "left": f"failed ({record.reason})"}
            raise drift_failure(judged, evidence)
        if record.state is State.failed and record.reason in BASELINE_REASONS and judged.on_baseline:
            back = reentry(record.resume_from)
            await rec.move(host.hostname, back, {**evidence, "on_baseline": True})
            return {**evidence, "on_baseline": True, "back_to": back.value}
        return {**evidence, "on_baseline": judged.on_baseline, "unknown": list(judged.unknown)}

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        async with self.session(host) as bmc:
            found = await read_firmware(bmc)
        return await self.record(host, found, self.judged(host, found), rec)
