"""What the state store reads and writes: host records, events, requested moves and their outcomes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.state.integrity import UnknownStateValue
from provision.state.lifecycle import State
from provision.state.redact import redact


@dataclass(frozen=True)
class HostRecord:
    hostname: str
    rack: str
    state: State
    reason: str | None
    resume_from: State | None
    evidence: Any
    updated_at: float
    in_site: bool


@dataclass(frozen=True)
class Event:
    id: int
    ts: float
    host: str
    from_state: State | None
    to_state: State
    command: str
    reason: str | None
    evidence: Any
    actor: str
    override: bool


@dataclass(frozen=True)
class Change:
    """One requested move, for `transition_many`; `facts` (host facts learnt on the way, see
    `provision.state.facts`) are written in the move's transaction, or not at all, and so are the
    intents it `settles` (`provision.state.intents`: the changes asked of peers that this move records)."""

    host: str
    to: State
    command: str
    reason: str | None = None
    evidence: Any = None
    may_skip: frozenset[State] = field(default_factory=frozenset)
    facts: Mapping[str, Any] | None = None
    settles: tuple[int, ...] = ()


@dataclass(frozen=True)
class Move:
    """What one requested change did: the host's state before and after (unchanged when already reached)."""

    host: str
    before: State
    after: State
    changed: bool


def dumps(evidence: Any) -> str | None:
    if evidence is None:
        return None
    return json.dumps(redact(evidence), sort_keys=True, default=str)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _state(value: Any, host: str) -> State:
    try:
        return State(value)
    except ValueError:
        raise UnknownStateValue(f"host {host} has state {value!r}, which is no lifecycle state") from None


def host_record(row: sqlite3.Row) -> HostRecord:
    return HostRecord(
        hostname=row["hostname"],
        rack=row["rack"],
        state=_state(row["state"], row["hostname"]),
        reason=row["reason"],
        resume_from=_state(row["resume_from"], row["hostname"]) if row["resume_from"] else None,
        evidence=loads(row["evidence"]),
        updated_at=row["updated_at"],
        in_site=bool(row["in_site"]),
    )


def event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        ts=row["ts"],
        host=row["host"],
        from_state=_state(row["from_state"], row["host"]) if row["from_state"] else None,
        to_state=_state(row["to_state"], row["host"]),
        command=row["command"],
        reason=row["reason"],
        evidence=loads(row["evidence"]),
        actor=row["actor"],
        override=bool(row["override"]),
    )


def counts(records: Iterable[HostRecord]) -> Mapping[State, int]:
    out: dict[State, int] = {}
    for rec in records:
        out[rec.state] = out.get(rec.state, 0) + 1
    return out
