"""The firmware steps, run by the one step runner on the BMC steps' base (`provision/bmc/step.py`).

`InventoryStep` (`provision firmware inventory`): every BMC's firmware components and BIOS attributes, judged
against the host class's baseline, recorded in the `host_firmware` table. A host off its baseline fails
`firmware_drift` (or `bios_drift` when only BIOS attributes differ) with every difference as evidence: the
component, the version seen, the one wanted. A host that failed for drift and is found on its baseline again (fixed
by hand, or by an apply) re-enters the flow where it left it, at `configured` at the latest: health and burn-in earn
golden again. A part the BMC does not serve is unknown: recorded, no failure, and the golden gate (gate.py) keeps the
host out of golden meanwhile. The changes a killed apply left open are closed from what it read (reconcile.py).

`ApplyStep`, the apply steps' base (the plan, the reboot gate, intents, the read-back, the move), and
`FirmwareApplyStep` (`provision firmware apply`: SimpleUpdate or the multipart push, then a bounded reboot), run on
one wave of hosts (rollout.py runs the waves); the BIOS apply step builds on the same base (`provision/bios/step.py`).
Per host, every change is an intent first (`provision.state.intents`, system `bmc`): written before the BMC is
asked, closed `confirmed` by the read-back that sees it done, or `failed`. A run killed in between leaves the intent
open; the next run's plan is made from a fresh inventory, so a host whose update did land is no longer planned
(never flashed twice) and the open intent is closed `reconciled` with what the BMC showed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from provision.bmc.harvest import find_system
from provision.bmc.power import PowerAction, power
from provision.bmc.step import BmcStep, RunOptions, base_url
from provision.firmware.drift import Judgement, judge
from provision.firmware.images import ImageError, ImageServer, verify_image
from provision.firmware.plan import HostPlan, RolloutPlan, Update
from provision.firmware.read import HostFirmware, read_firmware
from provision.firmware.reasons import BASELINE_REASONS, DRIFT_REASONS
from provision.firmware.reconcile import reconcile_dead
from provision.firmware.table import FirmwareRow, write_rows
from provision.firmware.tasks import push_update, simple_update, wait_for_bmc
from provision.redfish import RedfishClient
from provision.site import Host, Site
from provision.state import State, StateStore
from provision.state.intents import Ask, Outcome, begin_in, close
from provision.state.lifecycle import RANK
from provision.steps.pipeline import FIRMWARE_APPLY, FIRMWARE_INVENTORY
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


def judged_row(site: Site, host: Host, found: HostFirmware, command: str) -> tuple[Judgement, FirmwareRow]:
    """What a BMC reported (`found`), judged against the host class's baseline, and the host_firmware row that
    records both: the inventory's and the apply's read-back alike."""
    judged = judge(site.host_class(host).firmware, found.components, found.bios)
    return judged, FirmwareRow(host.hostname, time.time(), found.as_json(), judged.as_json(), judged.on_baseline,
                               command)


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
        self.said = await asyncio.to_thread(reconcile_dead, self.store, read, self.command)
        self.closed_intents = tuple(sorted(self.said))
        return [dataclasses.replace(r, reconciled=self.said[r.host]) if r.host in self.said else r for r in results]

    async def record(self, host: Host, found: HostFirmware, rec: Recording) -> dict[str, Any]:
        """The row, then the lifecycle: drift fails the host, a drifted host back on baseline re-enters."""
        judged, row = judged_row(self.site, host, found, rec.command)
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
        return await self.record(host, found, rec)


class RebootGate:
    """At most `site` hosts rebooting at once, and `per_rack` in any one rack; records the peaks."""

    def __init__(self, site: int, per_rack: int) -> None:
        self._site = asyncio.Semaphore(site)
        self._per_rack = per_rack
        self._racks: dict[str, asyncio.Semaphore] = {}
        self.now: dict[str, int] = {}
        self.peak_site = 0
        self.peak_rack = 0

    @contextlib.asynccontextmanager
    async def slot(self, rack: str) -> AsyncIterator[None]:
        rack_gate = self._racks.setdefault(rack, asyncio.Semaphore(self._per_rack))
        async with rack_gate, self._site:
            self.now[rack] = self.now.get(rack, 0) + 1
            self.peak_rack = max(self.peak_rack, self.now[rack])
            self.peak_site = max(self.peak_site, sum(self.now.values()))
            try:
                yield
            finally:
                self.now[rack] -= 1


class ApplyStep(BmcStep):
    """Shared by both apply steps: the plan, the reboot gate, intents, the read-back and the move."""

    def __init__(self, site: Site, store: StateStore, plan: RolloutPlan, gate: RebootGate,
                 options: RunOptions | None = None) -> None:
        super().__init__(site, store, options)
        self.plan = plan
        self.gate = gate
        self.rollout = site.spec.firmware_rollout

    def skip_reason(self, record: Any) -> str | None:
        if record.state is State.failed and record.reason not in BASELINE_REASONS:
            return f"failed ({record.reason}): not changed"
        return None

    def intend(self, host: Host, action: str, target: str) -> int:
        with self.store.transaction() as db:
            return begin_in(db, Ask(host.hostname, "bmc", base_url(host), action, target, self.command))

    def settle(self, ids: list[int], outcome: Outcome, observed: Mapping[str, Any]) -> None:
        if ids:
            with self.store.transaction() as db:
                close(db, ids, outcome, dict(observed))

    def failed(self, ids: list[int], evidence: dict[str, Any], exc: Exception) -> Exception:
        """Close this host's intents failed (any error: none is left open by a run that goes on) and give back
        the error, a HostFailure carrying what was done so far."""
        reason = exc.reason if isinstance(exc, HostFailure) else type(exc).__name__
        self.settle(ids, Outcome.failed, {"reason": reason})
        if isinstance(exc, HostFailure):
            exc.evidence = {**evidence, **exc.evidence}
        return exc

    async def reboot(self, bmc: RedfishClient, host: Host) -> dict[str, Any]:
        async with self.gate.slot(host.rack):
            system = await find_system(bmc)
            done = await power(bmc, system, PowerAction.cycle, timeout_s=self.rollout.reboot_timeout_s,
                               poll_s=self.rollout.poll_s)
        return done

    async def read_back(self, host: Host, rec: Recording) -> tuple[HostFirmware, Judgement]:
        """What the BMC reports now, judged and recorded in the host_firmware table."""
        async with self.session(host) as bmc:
            found = await read_firmware(bmc)
        judged, row = judged_row(self.site, host, found, rec.command)
        await asyncio.to_thread(write_rows, self.store, [row])
        return found, judged

    async def finish(self, host: Host, rec: Recording, judged: Judgement, ids: list[int],
                     evidence: dict[str, Any]) -> dict[str, Any]:
        """On baseline: back into the flow. Otherwise the drift that is left fails the host again."""
        record = self.store.get(host.hostname)
        if judged.on_baseline:
            self.settle(ids, Outcome.confirmed, {"on_baseline": True})
            if record.state is State.failed:
                back = reentry(record.resume_from)
                await rec.move(host.hostname, back, {**evidence, "on_baseline": True})
                return {**evidence, "back_to": back.value}
            return evidence
        if judged.firmware or judged.bios:
            self.settle(ids, Outcome.confirmed, {"drift_left": judged.as_json()})
            raise drift_failure(judged, evidence)
        return {**evidence, "unknown": list(judged.unknown)}


class FirmwareApplyStep(ApplyStep):
    spec = FIRMWARE_APPLY

    def __init__(self, site: Site, store: StateStore, plan: RolloutPlan, gate: RebootGate,
                 images: ImageServer | None, urls: Mapping[str, str], options: RunOptions | None = None) -> None:
        super().__init__(site, store, plan, gate, options)
        self.images = images
        self.urls = urls  # image file -> URL

    async def _update(self, bmc: RedfishClient, found: HostFirmware, update: Update) -> dict[str, Any]:
        """SimpleUpdate from the image server where the BMC offers it, else the image pushed to its
        MultipartHttpPushUri (read and checked against the pin just before it is sent)."""
        own = update.kind == "bmc"
        timeout_s, poll_s = self.rollout.task_timeout_s, self.rollout.poll_s
        staged = None if own else found.staged_job(update.components)
        if staged is not None:  # a dead run's update the BMC holds for the next reboot: not sent again
            return {**update.as_json(), "via": "staged", "job": staged.id, "job_state": staged.state}
        mine = [c for c in found.components or () if c.key in update.components]
        targets = tuple(c.path for c in mine) if update.targeted else ()
        if found.simple_update is not None and self.images is not None:
            url = self.urls[update.image.file]
            end = await simple_update(bmc, found.simple_update, url, timeout_s=timeout_s, poll_s=poll_s, own=own,
                                      targets=targets,
                                      hpe_service=found.update_service if found.hpe_progress else None)
            if self.images.served_ok(url) is False:
                raise HostFailure("firmware_image_mismatch", f"the bytes served for {update.image.file} were not "
                                  "the pinned image (the file changed on disk)", {"image": update.image.file})
            return {**update.as_json(), "via": "SimpleUpdate", **end.as_json()}
        if found.multipart_push is None:
            why = ("offers neither SimpleUpdate nor MultipartHttpPushUri" if found.simple_update is None else
                   "offers only SimpleUpdate, and the site has no image server (firmware_rollout.image_url)")
            raise HostFailure("firmware_update_refused", f"the BMC's UpdateService {why}",
                              {"update_service": found.update_service})
        try:
            path = await asyncio.to_thread(verify_image, self.site.directory, update.image)
            image = await asyncio.to_thread(path.read_bytes)
        except ImageError as exc:
            raise HostFailure("firmware_image_mismatch", str(exc), {"image": update.image.file}) from None
        if hashlib.sha256(image).hexdigest() != update.image.sha256:  # changed between the check and the read
            raise HostFailure("firmware_image_mismatch", f"{update.image.file} changed on disk while it was read",
                              {"image": update.image.file})
        end = await push_update(bmc, found.multipart_push, path.name, image, timeout_s=timeout_s, poll_s=poll_s,
                                own=own, targets=targets)
        return {**update.as_json(), "via": "MultipartHttpPushUri", **end.as_json()}

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        planned: HostPlan = self.plan.host(host.hostname)
        done: list[dict[str, Any]] = []
        ids: list[int] = []
        evidence: dict[str, Any] = {"bmc": base_url(host), "updates": done}
        try:
            needs_reboot = False
            for update in planned.updates:
                ids.append(await asyncio.to_thread(self.intend, host, "firmware_update",
                                                   f"{update.pin} {update.wanted}"))
                async with self.session(host) as bmc:
                    found = await read_firmware(bmc, bios=False)
                    done.append(await self._update(bmc, found, update))
                if update.kind == "bmc":
                    waited = await wait_for_bmc(self._probe(host), timeout_s=self.rollout.bmc_return_timeout_s,
                                                poll_s=self.rollout.poll_s)
                    done[-1]["bmc_back_after_s"] = round(waited, 2)
                else:
                    needs_reboot = True
            if needs_reboot:
                async with self.session(host) as bmc:
                    evidence["reboot"] = await self.reboot(bmc, host)
        except Exception as exc:
            raise self.failed(ids, evidence, exc) from None
        found, judged = await self.read_back(host, rec)
        unchanged = [d for d in judged.firmware if any(d.pin == u.pin for u in planned.updates)]
        if unchanged:
            self.settle(ids, Outcome.failed, {"drift_left": judged.as_json()})
            raise HostFailure("firmware_version_unchanged", "after the update and reboot: " +
                              "; ".join(d.line() for d in unchanged[:4]), {**evidence, "drift": judged.as_json()})
        return await self.finish(host, rec, judged, ids, evidence)

    def _probe(self, host: Host) -> Any:
        # One try per probe: the client's own retries of a 503 would only slow the wait down.
        options = dataclasses.replace(self.options.client, retries=0)

        async def probe() -> None:
            async with RedfishClient(base_url(host), self._login(host), tls=self._tls, options=options) as bmc:
                await bmc.root()
        return probe
