"""Applying a `PortPlan`: disable both ends of every condemned link, each step in the port ledger.

Dry-run unless asked: without `apply` nothing is sent and nothing is written. A plan over its caps
(`needs_force`) applies nothing without `force`. For each link the hosts behind it leave golden (`hold`: a
kill from then on leaves none of them golden), the ledger gets `planned` (who, why, evidence, ticket), then
each end is read, disabled only if it is not already (a rerun sends nothing twice), and read again once the
change is done (through UFM: once its job has completed, not when UFM accepted it); the link ends `disabled`,
`apply_failed` with what was done to each end and the error (a UFM job's status and summary), or `job_timeout`
when a job was still running at the deadline.

The first link goes alone (a UFM that answers 401 or 503 fails one link, not twenty), then up to
`parallel` links at once, each link's ends one after the other (the HCA end first); UFM's jobs take
seconds, so a 20-port plan does not wait for them one by one. After the first failure no further link
starts; links already started are followed to their end and recorded. Links never started have no row,
so a rerun picks up exactly where this one stopped; a run killed between a `planned` row and its outcome is
reconciled by the next (reconcile.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fabric.errors import FabricError
from fabric.ports.actuate import ActionTimeout, Actuator
from fabric.ports.ledger import (
    APPLY_FAILED,
    DISABLED,
    JOB_TIMEOUT,
    PLANNED,
    Ledger,
    LedgerEnd,
    LedgerEntry,
    link_id,
)
from fabric.ports.plan import PlannedLink, PortPlan
from fabric.topology import End

COMMAND = "fabric ports apply"


@dataclass(frozen=True)
class LinkOutcome:
    link: str
    state: str  # planned (dry run) | disabled | already_disabled | apply_failed | job_timeout
    ends: tuple[LedgerEnd, ...]
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"link": self.link, "state": self.state, "detail": self.detail,
                "ends": [e.to_dict() for e in self.ends]}


@dataclass(frozen=True)
class ApplyReport:
    applied: bool
    via: str
    outcomes: tuple[LinkOutcome, ...]
    refused: tuple[str, ...] = ()  # the caps, when the plan needs --force and did not get it
    stopped: str | None = None  # the error that stopped the run

    @property
    def ok(self) -> bool:
        return not self.refused and self.stopped is None

    def to_dict(self) -> dict[str, object]:
        return {"applied": self.applied, "via": self.via, "refused": list(self.refused), "stopped": self.stopped,
                "links": [o.to_dict() for o in self.outcomes]}


def ledger_ends(pl: PlannedLink) -> tuple[LedgerEnd, ...]:
    return tuple(LedgerEnd(e.guid, e.port, e.name, e.is_switch, str(e.location) if e.location else None, e.label)
                 for e in pl.ends())


def _order(ends: tuple[LedgerEnd, ...]) -> list[LedgerEnd]:
    """HCA ends first: disabling a switch port first would cut the path to the HCA behind it."""
    return sorted(ends, key=lambda e: e.is_switch)


async def disable_ends(actuator: Actuator, ends: tuple[LedgerEnd, ...]) -> tuple[list[LedgerEnd], FabricError | None]:
    """Each end disabled and verified (ends already disabled are not sent again); the error that stopped it."""
    done: list[LedgerEnd] = []
    for end in _order(ends):
        at = End(end.guid, end.port)
        if not actuator.reaches(at, end.is_switch):
            done.append(replace(end, done=f"left enabled: {actuator.via} cannot reach a host's HCA once its "
                                     "link is down (the switch end is disabled, the link is down all the same)"))
            continue
        note: str | None = None
        try:
            if (await actuator.status(at)).disabled:
                done.append(replace(end, done="already disabled (nothing sent)", job=None))
                continue
            note = await actuator.set_enabled(at, False)
            after = await actuator.status(at)
            if not after.disabled:
                raise FabricError(f"{end.describe()}: still {after.phys} after disable"
                                  + (f" ({note})" if note else ""))
        except FabricError as e:
            what = "job_timeout" if isinstance(e, ActionTimeout) else "failed"
            done.append(replace(end, done=f"{what}: {e}", job=None))
            return done + [replace(x, done="not attempted", job=None) for x in _order(ends)[len(done):]], e
        done.append(replace(end, done="disabled", job=note))
    return done, None


async def apply_plan(plan: PortPlan, actuator: Actuator, ledger: Ledger, *, apply: bool, force: bool,
                     actor: str, ticket: Callable[[PlannedLink], tuple[str, Mapping[str, Any]]],
                     parallel: int = 1,
                     hold: Callable[[LedgerEntry], Awaitable[None]] | None = None) -> ApplyReport:
    """`ticket(link)`: its ticket text and what the ledger keeps besides (design cable id, design rate).
    `parallel`: links in flight at once after the first (1 in-band: directed routes must not cross a link
    being changed; UFM reaches every port itself). `hold(row)`: given the `planned` row about to be written,
    moves the hosts behind it out of golden, before the row and before any port is touched."""
    if plan.needs_force and not force:
        return ApplyReport(False, actuator.via, (), tuple(plan.cap.reasons()))
    if not apply:
        return ApplyReport(False, actuator.via, tuple(
            LinkOutcome(link_id(ledger_ends(pl)), PLANNED, ledger_ends(pl), "dry run: nothing sent")
            for pl in plan.disable))
    outcomes: dict[int, LinkOutcome] = {}
    stopped: list[str] = []

    async def one(i: int, pl: PlannedLink) -> None:
        if stopped:
            return  # after a failure nothing new starts: no row, a rerun starts here
        ends = ledger_ends(pl)
        text, extra = ticket(pl)
        base = LedgerEntry(link_id(ends), time.time(), actor, COMMAND, PLANNED, actuator.via, pl.reason, ends,
                           tuple(e.to_dict() for e in pl.evidence), text, "", pl.cable_serial, extra=extra)
        if hold is not None:
            await hold(base)
        ledger.record(base)
        done, error = await disable_ends(actuator, ends)
        state = (JOB_TIMEOUT if isinstance(error, ActionTimeout) else APPLY_FAILED) if error else DISABLED
        detail = "; ".join(e.outcome() for e in done)
        ledger.record(replace(base, at=time.time(), state=state, ends=tuple(done), detail=detail))
        already = all((e.done or "").startswith(("already", "left")) for e in done)
        outcomes[i] = LinkOutcome(base.link, "already_disabled" if already and not error else state, tuple(done),
                                  detail)
        if error:
            stopped.append(str(error))

    links = list(plan.disable)
    if links:
        await one(0, links[0])
    gate = asyncio.Semaphore(max(1, parallel))

    async def gated(i: int, pl: PlannedLink) -> None:
        async with gate:
            await one(i, pl)

    async with asyncio.TaskGroup() as group:
        for i, pl in enumerate(links[1:], 1):
            group.create_task(gated(i, pl))
    return ApplyReport(True, actuator.via, tuple(outcomes[i] for i in sorted(outcomes)),
                       stopped=stopped[0] if stopped else None)
