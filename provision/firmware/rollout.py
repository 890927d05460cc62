"""`provision firmware|bios plan|apply` as library calls (`apply_firmware` here, `apply_bios` in
provision/bios/step.py, both through `roll_out`): a fresh plan from the recorded inventory, then the waves: the
canary alone (any failure there stops everything), then batches, stopping once the failures reach the site's
`firmware_rollout.max_failures` (the batch in flight finishes). Reboots are bounded per rack and site-wide by one
gate shared by every wave. Resumable: every run plans from what the BMCs last reported, so hosts a killed run
finished are on baseline and left alone; intents a dead run left open are closed `reconciled` against that
inventory first.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from provision.bmc.step import RunOptions
from provision.errors import BringupError
from provision.firmware.drift import Judgement
from provision.firmware.images import ImageError, server_for, verify_image
from provision.firmware.plan import Operation, RolloutPlan, plan_rollout
from provision.firmware.reasons import ACTIONS
from provision.firmware.step import ApplyStep, FirmwareApplyStep, InventoryStep, RebootGate
from provision.firmware.table import read_rows
from provision.site import Host, Site
from provision.state import StateStore
from provision.state.intents import open_intents
from provision.steps.runner import HostResult, Progress


def current_plan(site: Site, store: StateStore, operation: Operation, hosts: Sequence[Host] | None = None
                 ) -> RolloutPlan:
    rows = read_rows(store)
    judgements = {n: Judgement.from_json(r.judgement) for n, r in rows.items()}
    states = {r.hostname: (r.state.value, r.reason) for r in store.hosts()}
    names = None if hosts is None else [h.hostname for h in hosts]
    return plan_rollout(site, operation, judgements, states, names)


@dataclass
class RolloutResult:
    plan: RolloutPlan
    results: list[HostResult] = field(default_factory=list)
    stopped: str | None = None  # why the rollout stopped before its last wave
    waves_run: int = 0
    reconciled: list[str] = field(default_factory=list)  # hosts whose dead apply intents were closed
    reconciled_lines: list[str] = field(default_factory=list)  # what the BMCs showed for them, a line per change
    peak_rebooting: int = 0
    peak_rebooting_per_rack: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"plan": self.plan.as_json(), "waves_run": self.waves_run, "stopped": self.stopped,
                "reconciled": self.reconciled, "reconciled_lines": self.reconciled_lines,
                "peak_rebooting": self.peak_rebooting, "peak_rebooting_per_rack": self.peak_rebooting_per_rack}


async def _read_again(site: Site, store: StateStore, hosts: Sequence[Host], options: RunOptions
                      ) -> dict[str, tuple[str, ...]]:
    """The BMCs of the selected hosts a killed apply had asked for a change: read them again before planning, so
    that an update that landed after the controller died is seen (recorded, the host back into the flow) and never
    flashed twice; the inventory closes those intents reconciled. What it found, by host. Hosts outside the
    selection are left to the command that names them, as power and pxe-boot do."""
    names = [h.hostname for h in hosts]
    asked = {i.host for i in open_intents(store, system="bmc", hosts=names, dead_only=True) if i.action in ACTIONS}
    if not asked:
        return {}
    step = InventoryStep(site, store, options)
    await step.run([h for h in hosts if h.hostname in asked])
    return step.said


# The apply step for one plan under the rollout's one reboot gate, open for the rollout's waves.
StepFor = Callable[[RolloutPlan, RebootGate], AbstractAsyncContextManager[ApplyStep]]


async def roll_out(site: Site, store: StateStore, operation: Operation, hosts: Sequence[Host], options: RunOptions,
                   step_for: StepFor, progress: Progress | None = None) -> RolloutResult:
    said = await _read_again(site, store, hosts, options)
    plan = current_plan(site, store, operation, hosts)
    result = RolloutResult(plan, reconciled=sorted(said), reconciled_lines=[x for h in sorted(said) for x in said[h]])
    if not plan.hosts:
        return result
    rollout = site.spec.firmware_rollout
    gate = RebootGate(rollout.max_rebooting, rollout.max_rebooting_per_rack)
    by_name = {h.hostname: h for h in site.hosts()}
    async with step_for(plan, gate) as step:
        await _waves(step, plan, by_name, result, progress)
    result.peak_rebooting, result.peak_rebooting_per_rack = gate.peak_site, gate.peak_rack
    return result


async def apply_firmware(site: Site, store: StateStore, hosts: Sequence[Host], options: RunOptions,
                         progress: Progress | None = None) -> RolloutResult:
    """`provision firmware apply`: every pinned image checked before any BMC is told of it, served from the
    controller's image server (without `image_url` only BMCs that take a multipart push can be updated: the others
    fail, saying so)."""

    @contextlib.asynccontextmanager
    async def step(plan: RolloutPlan, gate: RebootGate) -> AsyncIterator[FirmwareApplyStep]:
        rollout = site.spec.firmware_rollout
        images = server_for(str(rollout.image_url), rollout.image_listen) if rollout.image_url else None
        urls: dict[str, str] = {}
        try:
            for u in {u.image.file: u.image for h in plan.hosts for u in h.updates}.values():
                verify_image(site.directory, u)  # refused before any BMC is told of it
                if images is not None:
                    urls[u.file] = images.add(site.directory, u)
        except ImageError as exc:
            raise BringupError(f"firmware_image_mismatch: {exc}") from None
        async with contextlib.AsyncExitStack() as stack:
            if images is not None:
                await stack.enter_async_context(images)
            yield FirmwareApplyStep(site, store, plan, gate, images, urls, options)

    return await roll_out(site, store, "firmware", hosts, options, step, progress)


async def _waves(step: ApplyStep, plan: RolloutPlan, by_name: dict[str, Host],
                 result: RolloutResult, progress: Progress | None) -> None:
    rollout = step.rollout
    failures = 0
    for i, wave in enumerate(plan.waves):
        results = await step.run([by_name[n] for n in wave], progress)
        result.results.extend(results)
        result.waves_run += 1
        failures += sum(1 for r in results if r.failed)
        canary = i == 0 and rollout.canary > 0
        if canary and failures:
            result.stopped = f"the canary failed ({', '.join(r.host for r in results if r.failed)}): no batch was run"
            return
        if failures >= rollout.max_failures and i < len(plan.waves) - 1:
            result.stopped = (f"{failures} hosts failed (firmware_rollout.max_failures {rollout.max_failures}): "
                              f"{len(plan.waves) - i - 1} waves not run")
            return
