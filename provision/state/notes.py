"""History entries that move no state: a fact about a host worth keeping beside its moves (an environment
shipped to it, a training job's diagnosis naming it). One event with from_state = to_state, the reason a
machine-readable word, the evidence as JSON (redacted like every event's)."""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

from provision.errors import StateError, UnknownHost
from provision.state.records import dumps
from provision.state.store import StateStore

_REASON = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def note(store: StateStore, host: str, *, reason: str, command: str, evidence: Any = None) -> None:
    with store.transaction() as db:
        note_in(db, host, reason=reason, command=command, evidence=evidence, actor=store.actor)


def note_in(db: sqlite3.Connection, host: str, *, reason: str, command: str, evidence: Any, actor: str) -> None:
    """`note` inside the caller's transaction (written with whatever else that transaction writes)."""
    if not _REASON.match(reason):
        raise StateError(f"a history note needs a machine-readable reason like 'env_shipped' (got {reason!r})")
    row = db.execute("SELECT state FROM hosts WHERE hostname = ?", (host,)).fetchone()
    if row is None:
        raise UnknownHost(f"host {host!r} is not in the state store (is it in the site file?)")
    db.execute(
        "INSERT INTO events (ts, host, from_state, to_state, command, reason, evidence, actor, override) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (time.time(), host, row[0], row[0], command, reason, dumps(evidence), actor),
    )
