"""The apply steps: firmware through SimpleUpdate, BIOS through Bios/Settings, each ended by a bounded reboot and
a read-back, run by the one step runner on one wave of hosts (rollout.py runs the waves).

Per host, every change is an intent first (`provision.state.intents`, system `bmc`): written before the BMC is
asked, closed `confirmed` by the read-back that sees it done, or `failed`. A run killed in between leaves the
intent open; the next run's plan is made from a fresh inventory, so a host whose update did land is no longer
planned (never flashed twice) and the open intent is closed `reconciled` with what the BMC showed.
After the read-back a host on its baseline re-enters the flow at `configured` (or where it failed, if earlier):
health and burn-in earn golden again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from provision.bmc.harvest import find_system
from provision.bmc.power import PowerAction, power
from provision.bmc.step import BmcStep, RunOptions, base_url
from provision.firmware.bios import BiosState, pending
from provision.firmware.drift import Judgement, bios_drift, judge
from provision.firmware.images import ImageError, ImageServer, verify_image
from provision.firmware.inventory_step import drift_failure, reentry
from provision.firmware.jobs import bios_job, staged_for
from provision.firmware.plan import HostPlan, RolloutPlan, Update
from provision.firmware.read import HostFirmware, read_firmware
from provision.firmware.reasons import BASELINE_REASONS
from provision.firmware.table import FirmwareRow, write_rows
from provision.firmware.tasks import push_update, simple_update, wait_for_bmc
from provision.redfish import RedfishClient, RedfishRequestRejected, RedfishUnsupported
from provision.site import Host, Site
from provision.site.firmware import WINDOWED
from provision.state import State, StateStore
from provision.state.intents import Ask, Outcome, begin_in, close
from provision.steps.pipeline import BIOS_APPLY, FIRMWARE_APPLY
from provision.steps.runner import HostFailure, Recording


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
        judged = judge(self.site.host_class(host).firmware, found.components, found.bios)
        row = FirmwareRow(host.hostname, time.time(), found.as_json(), judged.as_json(), judged.on_baseline,
                          rec.command)
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
        mine = [c for c in found.components or () if c.key in update.components]
        staged = None if own else staged_for(found.jobs, [c.name for c in mine])
        if staged is not None:  # a dead run's update the BMC holds for the next reboot: not sent again
            return {**update.as_json(), "via": "staged", "job": staged.id, "job_state": staged.state}
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


class BiosApplyStep(ApplyStep):
    spec = BIOS_APPLY

    def apply_time(self, bios: BiosState) -> str | None:
        """The site's `firmware_rollout.bios_apply_time` where the BMC lists it (or lists none); without one, OnReset
        where the BMC lists it (or lists nothing), Immediate only where that is all it offers. A time the BMC does not
        list is refused here, before any PATCH: the BMC would answer 400."""
        asked = self.rollout.bios_apply_time
        if asked is not None:
            if bios.apply_times and asked not in bios.apply_times:
                raise HostFailure("bios_setting_refused", f"the site asks ApplyTime {asked}; the BMC's Bios lists "
                                  f"only {', '.join(bios.apply_times)}", {"apply_times": list(bios.apply_times)})
            return asked
        if not bios.apply_times or "OnReset" in bios.apply_times:
            return "OnReset" if bios.apply_times else None
        return "Immediate" if "Immediate" in bios.apply_times else bios.apply_times[0]

    def annotation(self, when: str) -> dict[str, Any]:
        """`@Redfish.SettingsApplyTime` (DMTF Settings v1_4 PreferredApplyTime), the site's window where it is one."""
        out: dict[str, Any] = {"ApplyTime": when}
        window = self.rollout.maintenance_window
        if when in WINDOWED and window is not None:
            out["MaintenanceWindowStartTime"] = window.start.isoformat()
            out["MaintenanceWindowDurationInSeconds"] = window.duration_s
        return out

    def when_done(self, when: str | None, now: float | None = None) -> str:
        """What ends the change: `reboot` (ours), `bmc` (the BMC resets the host itself: Immediate, or the window
        has started), `scheduled` (the window is ahead: the next inventory after it sees the change)."""
        window = self.rollout.maintenance_window
        if when not in WINDOWED or window is None:
            return "bmc" if when == "Immediate" else "reboot"
        start = window.start.timestamp()
        at = time.time() if now is None else now
        if at < start:
            return "scheduled"
        return "bmc" if when == "AtMaintenanceWindowStart" else "reboot"

    async def applied(self, bmc: RedfishClient, host: Host, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Until the BMC's own reset has applied the settings (read back from Bios), within reboot_timeout_s; the
        reset counts against the reboot limits as ours would."""
        deadline = time.monotonic() + self.rollout.reboot_timeout_s
        async with self.gate.slot(host.rack):
            while True:
                found = await read_firmware(bmc)
                if found.bios is not None and not bios_drift(dict(settings), found.bios):
                    return {"reset_by": "the BMC"}
                if time.monotonic() >= deadline:
                    raise HostFailure("reboot_timeout", f"the BMC's own reset did not apply the settings within "
                                      f"{self.rollout.reboot_timeout_s:g} s", {})
                await asyncio.sleep(self.rollout.poll_s)

    async def pending_already(self, bmc: RedfishClient, found: HostFirmware, settings: Mapping[str, Any]) -> str | None:
        """The id of a scheduled BIOS job (a dead run's PATCH) whose pending attributes hold these settings."""
        job = bios_job(found.jobs)
        if job is None or found.bios is None or found.bios.settings_path is None:
            return None
        waiting = pending((await bmc.get(found.bios.settings_path)).data)
        return job.id if all(waiting.get(k) == v for k, v in settings.items()) else None

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        planned = self.plan.host(host.hostname)
        settings = dict(planned.settings)
        ids: list[int] = []
        evidence: dict[str, Any] = {"bmc": base_url(host), "settings": settings}
        try:
            async with self.session(host) as bmc:
                found = await read_firmware(bmc)
                if found.bios is None or found.bios.settings_path is None:
                    raise HostFailure("bios_setting_refused", "the BMC names no Bios SettingsObject to PATCH",
                                      {"notes": list(found.notes)})
                when = self.apply_time(found.bios)
                body: dict[str, Any] = {"Attributes": settings}
                if when is not None:
                    body["@Redfish.SettingsApplyTime"] = self.annotation(when)
                evidence["apply_time"] = when
                ids.append(await asyncio.to_thread(self.intend, host, "bios_settings",
                                                   ", ".join(f"{k}={v}" for k, v in settings.items())))
                if (job := await self.pending_already(bmc, found, settings)) is not None:
                    evidence["pending_job"] = job  # PATCHed by a dead run, waiting for its reboot: not sent again
                else:
                    try:
                        await bmc.patch(found.bios.settings_path, body, etag=found.bios.etag)
                    except (RedfishRequestRejected, RedfishUnsupported) as exc:
                        raise HostFailure("bios_setting_refused", f"Bios/Settings refused: {exc}",
                                          exc.evidence()) from None
                ending = "reboot" if "pending_job" in evidence else self.when_done(when)
                if ending == "scheduled":
                    window = self.rollout.maintenance_window
                    assert window is not None
                    evidence["scheduled_for"] = window.start.isoformat()
                    evidence["then"] = ("the BMC resets the host when the window starts" if when ==
                                        "AtMaintenanceWindowStart" else "a reboot inside the window applies it: run "
                                        "`provision bios apply` again then")
                    self.settle(ids, Outcome.confirmed, {"scheduled_for": evidence["scheduled_for"]})
                    return evidence  # applied by the BMC in the window; the next inventory after it reads it
                evidence["reboot"] = await (self.reboot(bmc, host) if ending == "reboot" else
                                            self.applied(bmc, host, settings))
        except Exception as exc:
            raise self.failed(ids, evidence, exc) from None
        found, judged = await self.read_back(host, rec)
        left = bios_drift(settings, found.bios) if found.bios is not None else []
        if left or found.bios is None:
            self.settle(ids, Outcome.failed, {"drift_left": judged.as_json()})
            raise HostFailure("bios_not_applied", "after the reboot: " + "; ".join(d.line() for d in left[:4]),
                              {**evidence, "drift": judged.as_json()})
        return await self.finish(host, rec, judged, ids, evidence)
