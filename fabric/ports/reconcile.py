"""Links left in flight by a run that was cut short: read their ports now and record what happened.

An apply writes `planned` before it touches a link and a re-enable writes `reenabling`; the row saying
how it ended comes after the ports changed. A run killed in between (SIGKILL, a lost controller) leaves
the intent as the link's latest row while the fabric may have changed: a link disabled at both ends is no
longer discovered, so a plain rerun would never plan it again and its host would stay golden. Every acting
`fabric ports` command therefore starts here, under the site's ports lock (so the intent it reads is no
live run's), and for each link in flight reads its ends through the run's actuator (UFM's port state, or
`ibportstate` in-band):

- `planned`, an end found disabled: the run had started on the link, which carries no traffic; the other
  end is disabled too (as the apply would have) and the link is recorded `disabled` (or `apply_failed` /
  `job_timeout` if finishing it fails), with the evidence that it was reconciled after an interrupted run;
  its ticket is the one the intent row holds.
- `planned`, every end still up: nothing was done; the link is recorded `apply_failed` ("not done"), so the
  plan of this run takes it up again if its evidence still condemns it.
- `reenabling`: the repair was never proven (the run died before its checks, or before recording them),
  so every end is disabled again and the link is recorded `disabled`; `fabric ports reenable` proves it anew.
- an end that cannot be read: the row stays in flight (not known is not failed), and is said so.

Hosts follow the recorded rows through the `ports` step (step.py), as after any apply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fabric.errors import FabricError
from fabric.ports.actuate import ActionTimeout, Actuator
from fabric.ports.apply import disable_ends
from fabric.ports.ledger import (
    APPLY_FAILED,
    DISABLED,
    IN_FLIGHT,
    JOB_TIMEOUT,
    PLANNED,
    Ledger,
    LedgerEnd,
    LedgerEntry,
)
from fabric.topology import End

COMMAND = "fabric ports reconcile"


@dataclass(frozen=True)
class Reconciled:
    link: str
    was: str  # planned | reenabling
    state: str  # what was recorded; the intent's own state when its ports could not be read
    detail: str
    row: int | None  # the ledger row recorded (None: nothing recorded, still in flight)

    def to_dict(self) -> dict[str, object]:
        return {"link": self.link, "was": self.was, "state": self.state, "detail": self.detail, "row": self.row}


def in_flight(ledger: Ledger) -> list[LedgerEntry]:
    """Links whose latest row is an intent (`planned`, `reenabling`) with no outcome recorded."""
    return [e for e in ledger.current().values() if e.state in IN_FLIGHT]


async def _disabled_ends(actuator: Actuator, ends: Sequence[LedgerEnd]) -> list[LedgerEnd]:
    """The ends this actuator reaches that are disabled now (reading each; FabricError if one cannot be read)."""
    out = []
    for end in ends:
        if actuator.reaches(End(end.guid, end.port), end.is_switch) and \
                (await actuator.status(End(end.guid, end.port))).disabled:
            out.append(end)
    return out


async def reconcile_one(entry: LedgerEntry, actuator: Actuator, ledger: Ledger, *, actor: str) -> Reconciled:
    row = f"row {entry.id} {entry.state} by {entry.actor} ({entry.command})"
    try:
        down = await _disabled_ends(actuator, entry.ends)
    except FabricError as e:
        return Reconciled(entry.link, entry.state, entry.state, f"still in flight ({row}): its ports could not be "
                          f"read through {actuator.via}: {e}", None)
    if entry.state == PLANNED and not down:
        ends = tuple(replace(e, done="not done (the run that planned it stopped before changing it)", job=None)
                     for e in entry.ends)
        state, error = APPLY_FAILED, None
        what = "found every end up: nothing was done; planned again if its evidence still condemns it"
    else:
        done, error = await disable_ends(actuator, entry.ends)
        found = {e.key() for e in down}
        ends = tuple(replace(e, done=f"{e.done} (found disabled after an interrupted run)")
                     if e.key() in found and (e.done or "").startswith("already") else e for e in done)
        state = (JOB_TIMEOUT if isinstance(error, ActionTimeout) else APPLY_FAILED) if error else DISABLED
        what = ("found " + (", ".join(e.describe() for e in down) or "no end") + " disabled; "
                + ("the repair was never proven, so the link is out of service again"
                   if entry.state != PLANNED else "the link carries no traffic: finished"))
    detail = f"reconciled after an interrupted run ({row}): {what}; " + "; ".join(e.outcome() for e in ends)
    evidence = {"time": None, "source": COMMAND, "kind": "reconciled", "code": None, "condemns": False,
                "text": f"reconciled after an interrupted run: {row}; {what}"}
    recorded = ledger.record(replace(entry, id=None, at=time.time(), actor=actor, command=COMMAND, state=state,
                                     ends=ends, evidence=(*entry.evidence, evidence), detail=detail))
    if error is not None:
        detail += f"; {error}"
    return Reconciled(entry.link, entry.state, state, detail, recorded.id)


async def reconcile(ledger: Ledger, actuator: Actuator, *, actor: str) -> tuple[Reconciled, ...]:
    """Every link in flight, one after the other (a kill while reconciling leaves the intent for the next run)."""
    return tuple([await reconcile_one(e, actuator, ledger, actor=actor) for e in in_flight(ledger)])
