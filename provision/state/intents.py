"""Every change bringup asks a peer to make is an intent first: on disk before the call, closed after.

One row per action asked of a peer (a BMC's reset or boot override, a MAAS commission, allocation, deployment
or release): the host, the system (`bmc`, `maas`), the subject (the BMC's address, MAAS's system id), the
action, its target (what the peer should show once it is done), the command and the run that asked (machine,
pid and the process's start time), when. The run closes it with its record: the host's next lifecycle move
closes every intent the run holds for the host in the move's own transaction (`Change.settles`), or the run
closes it with its read-back of the peer. An intent still open whose run is gone was left by a run killed
between asking and recording: the next command that acts on that system reads the peer's real state for it
and closes it `reconciled`, with a history note (`intent_reconciled`) saying what the peer showed. A host with
an open intent (a live run's or a dead one's) is never promoted golden nor written to the golden hostfile.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provision.state.intent_table import Outcome, close_rows, ensure, exists, start_time, this_run
from provision.state.notes import note_in
from provision.state.store import StateStore

__all__ = ["Ask", "Intent", "Outcome", "begin_in", "close", "hosts_in_flight", "open_intents", "reconcile", "run_alive",
           "this_run"]
RECONCILED = "intent_reconciled"  # the history note's reason


@dataclass(frozen=True)
class Ask:
    """A change about to be asked of a peer: for which host, of which system and subject, what and to what end,
    by which command."""

    host: str
    system: str
    subject: str
    action: str
    target: str
    command: str


@dataclass(frozen=True)
class Intent(Ask):
    """An intent as stored: what was asked, its id, the run that asked and when."""

    id: int
    run: str
    started_at: float

    def evidence(self) -> dict[str, Any]:
        """What a history note says about the intent it closes."""
        return {"system": self.system, "subject": self.subject, "action": self.action, "target": self.target,
                "asked_by": {"command": self.command, "run": self.run, "at": self.started_at}}


def run_alive(run: str) -> bool:
    """Whether the run that wrote an intent may still record it. A run of another machine cannot be checked
    from here and counts as alive (its intents are left to commands on that machine)."""
    parts = run.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False  # not a run this code wrote: nothing will close it
    machine, pid, started = parts
    if machine != socket.gethostname():
        return True
    return run == this_run() or start_time(int(pid)) == started


def begin_in(db: sqlite3.Connection, ask: Ask) -> int:
    """Write an intent inside the caller's transaction; its id (committed with the transaction)."""
    ensure(db)
    cur = db.execute(
        "INSERT INTO intents (host, system, subject, action, target, command, run, started_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (ask.host, ask.system, ask.subject, ask.action, ask.target, ask.command, this_run(), time.time()))
    return int(cur.lastrowid or 0)


def close(db: sqlite3.Connection, ids: Collection[int], outcome: Outcome, observed: Mapping[str, Any] | None) -> None:
    """Close intents this run holds, inside the caller's transaction, with what the run saw."""
    close_rows(db, ids, outcome, observed, run=this_run(), at=time.time())


def _intent(row: sqlite3.Row | tuple[Any, ...]) -> Intent:
    return Intent(id=int(row[0]), host=row[1], system=row[2], subject=row[3], action=row[4], target=row[5],
                  command=row[6], run=row[7], started_at=float(row[8]))


def open_intents(store: StateStore, *, system: str | None = None, hosts: Collection[str] | None = None,
                 dead_only: bool = False) -> list[Intent]:
    """Open intents (oldest first), of one system and some hosts where given; `dead_only`: only those whose
    run is gone (the ones to reconcile)."""
    db = store.reader()
    if not exists(db):
        return []
    sql = "SELECT id, host, system, subject, action, target, command, run, started_at FROM intents " \
          "WHERE closed_at IS NULL" + (" AND system = ?" if system else "") + " ORDER BY id"
    rows = [_intent(r) for r in db.execute(sql, (system,) if system else ()).fetchall()]
    wanted = None if hosts is None else set(hosts)
    found = [i for i in rows if wanted is None or i.host in wanted]
    return [i for i in found if not run_alive(i.run)] if dead_only else found


def hosts_in_flight(store: StateStore) -> dict[str, list[Intent]]:
    """Hosts with an open intent (of a live run or a dead one): none of them is golden."""
    out: dict[str, list[Intent]] = {}
    for intent in open_intents(store):
        out.setdefault(intent.host, []).append(intent)
    return out


def in_flight_line(intents: Sequence[Intent]) -> str:
    """Why a host is not golden, in one line."""
    first = intents[0]
    more = f" and {len(intents) - 1} more" if len(intents) > 1 else ""
    return (f"a change is in flight: {first.system} {first.action} ({first.target}) asked by `{first.command}`"
            f"{more}, not recorded yet (the next `{first.command}` reconciles it)")


def reconcile(store: StateStore, host: str, intents: Sequence[Intent], observed: Mapping[str, Any],
              *, command: str, lines: Sequence[str]) -> None:
    """Close a dead run's intents for one host with the peer's state as this run read it, and say so in the
    host's history, in one transaction."""
    evidence = {"intents": [i.evidence() for i in intents], "observed": dict(observed), "said": list(lines)}
    with store.transaction() as db:
        close(db, [i.id for i in intents], Outcome.reconciled, observed)
        note_in(db, host, reason=RECONCILED, command=command, evidence=evidence, actor=store.actor)


def closed(store: StateStore, ids: Collection[int]) -> dict[int, tuple[str, Any]]:
    """How the given intents were closed (outcome, observed); open ones are left out. For reports and tests."""
    db = store.reader()
    if not exists(db) or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT id, outcome, observed FROM intents WHERE closed_at IS NOT NULL AND id IN ({marks})",
                      tuple(ids)).fetchall()
    return {int(r[0]): (r[1], json.loads(r[2]) if r[2] else None) for r in rows}
