"""`provision bios apply`: the baseline's BIOS attributes PATCHed to the BMC's Bios/Settings, applied by a reset
(ours, bounded by the reboot gate, or the BMC's own for Immediate and maintenance windows) and read back. The step
builds on the firmware apply steps' base (`provision/firmware/step.py`: plan, reboot gate, intents, read-back,
re-entry) and runs in the same canary-then-batches rollout (`provision/firmware/rollout.py`).

The ApplyTime is the site's (`firmware_rollout.bios_apply_time`) where the BMC lists it, else OnReset where offered
(DMTF Settings v1_4 `@Redfish.SettingsApplyTime`, with the site's maintenance window where the time is one). A PATCH
a killed run left pending (a Scheduled BIOSConfiguration job whose Bios/Settings holds these attributes) is
activated by a reboot, never sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from provision.bmc.step import RunOptions, base_url
from provision.firmware.bios_resource import BiosState, pending
from provision.firmware.drift import bios_drift
from provision.firmware.jobs import bios_job
from provision.firmware.plan import RolloutPlan
from provision.firmware.read import HostFirmware, read_firmware
from provision.firmware.rollout import RolloutResult, roll_out
from provision.firmware.step import ApplyStep, RebootGate
from provision.redfish import RedfishClient, RedfishRequestRejected, RedfishUnsupported
from provision.site import Host, Site
from provision.site.firmware import WINDOWED
from provision.state import StateStore
from provision.state.intents import Outcome
from provision.steps.pipeline import BIOS_APPLY
from provision.steps.runner import HostFailure, Progress, Recording


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


async def apply_bios(site: Site, store: StateStore, hosts: Sequence[Host], options: RunOptions,
                     progress: Progress | None = None) -> RolloutResult:
    """`provision bios apply`: the BIOS plan from the last inventory, rolled out in waves."""

    @contextlib.asynccontextmanager
    async def step(plan: RolloutPlan, gate: RebootGate) -> AsyncIterator[BiosApplyStep]:
        yield BiosApplyStep(site, store, plan, gate, options)

    return await roll_out(site, store, "bios", hosts, options, step, progress)
