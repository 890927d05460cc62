"""The `intents` table: one row per change bringup asks a peer to make, written before it is asked.

Created on the first write (`CREATE TABLE IF NOT EXISTS` in the writer's transaction), as the other
packages' tables are; a store without it has no intents. The API over it is `provision.state.intents`;
this module holds only what the store itself needs to close a host's intents in the transaction of the
move that records them (`Change.settles`).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from provision.state.redact import redact

CREATE = """CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY, host TEXT NOT NULL, system TEXT NOT NULL, subject TEXT NOT NULL,
    action TEXT NOT NULL, target TEXT NOT NULL, command TEXT NOT NULL, run TEXT NOT NULL,
    started_at REAL NOT NULL, closed_at REAL, outcome TEXT, closed_by TEXT, observed TEXT)"""
OPEN_INDEX = "CREATE INDEX IF NOT EXISTS intents_open ON intents (host) WHERE closed_at IS NULL"


class Outcome(StrEnum):
    """How an intent was closed."""

    recorded = "recorded"  # the run that asked recorded the host's move (or failure) after it
    confirmed = "confirmed"  # the run that asked read the peer back and saw the target
    failed = "failed"  # the peer refused it, or the run's read-back shows it did not happen
    reconciled = "reconciled"  # a later run read the peer's state for it (its run died in between)


def ensure(db: sqlite3.Connection) -> None:
    db.execute(CREATE)
    db.execute(OPEN_INDEX)


def exists(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'intents'").fetchone() is not None


def close_rows(db: sqlite3.Connection, ids: Iterable[int], outcome: Outcome, observed: Mapping[str, Any] | None,
               *, run: str, at: float) -> None:
    """Close the given intents that are still open (one already closed keeps how it was closed)."""
    wanted = [(at, outcome.value, run, _dumps(observed), i) for i in ids]
    if not wanted:
        return
    ensure(db)
    db.executemany("UPDATE intents SET closed_at = ?, outcome = ?, closed_by = ?, observed = ? "
                   "WHERE id = ? AND closed_at IS NULL", wanted)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None when it is gone or
    a zombie (killed, not yet reaped: it will never record anything)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


_RUNS: dict[int, str] = {}


def this_run() -> str:
    """This process as a run: machine, pid and start time (a reused pid has another start time); by pid, so
    a forked child is a run of its own."""
    pid = os.getpid()
    if pid not in _RUNS:
        _RUNS[pid] = f"{socket.gethostname()}:{pid}:{start_time(pid) or 0}"
    return _RUNS[pid]


def _dumps(observed: Mapping[str, Any] | None) -> str | None:
    # A peer's answer may echo anything, a credential included: stored redacted, as evidence is.
    return None if observed is None else json.dumps(redact(dict(observed)), sort_keys=True, default=str)
