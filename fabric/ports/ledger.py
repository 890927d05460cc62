"""The port ledger: every action on a fabric link and its outcome, in the site's state store.

One append-only table (`port_ledger`) beside the lifecycle, written through `StateStore.transaction()`: a row
per step of the story of a link (planned, disabled, apply_failed, job_timeout, reenabling, reenabled,
reenable_refused), with who, when, why, the evidence, the ticket text and what was done to each end (and the
UFM job that did it). `job_timeout`: a UFM job accepted the change but was still running at the deadline, so
whether the port changed is not known; the next apply reads it and converges. A link's current state is its
latest row. An apply writes `planned` before touching anything, and a re-enable `reenabling`: the intent, so a
run cut short (a UFM that stops answering, an `ibportstate` that fails, a kill) always leaves a row saying
what it set out to do; the next acting command reads the ports of every link still in flight and records what
it finds (`reconcile.py`), and a rerun converges. Secrets never reach this table: rows hold GUIDs, names, tool
output and event text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric.errors import FabricError
from provision.state import StateStore

PLANNED, DISABLED, APPLY_FAILED, JOB_TIMEOUT = "planned", "disabled", "apply_failed", "job_timeout"
REENABLING, REENABLED, REENABLE_REFUSED = "reenabling", "reenabled", "reenable_refused"
STATES = (PLANNED, DISABLED, APPLY_FAILED, JOB_TIMEOUT, REENABLING, REENABLED, REENABLE_REFUSED)
# not known to carry traffic
OUT_OF_SERVICE = frozenset({PLANNED, DISABLED, APPLY_FAILED, JOB_TIMEOUT, REENABLING, REENABLE_REFUSED})
# an intent whose outcome was never recorded while it is the latest row (its run was cut short or still runs)
IN_FLIGHT = frozenset({PLANNED, REENABLING})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS port_ledger (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    link      TEXT NOT NULL,
    at        REAL NOT NULL,
    actor     TEXT NOT NULL,
    command   TEXT NOT NULL,
    state     TEXT NOT NULL,
    via       TEXT NOT NULL,
    why       TEXT NOT NULL,
    ends      TEXT NOT NULL,
    evidence  TEXT NOT NULL,
    ticket    TEXT NOT NULL DEFAULT '',
    detail    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS port_ledger_link ON port_ledger (link, id);
"""


class LedgerError(FabricError):
    """The port ledger could not be read or written, or a link it was asked about is not in it."""


@dataclass(frozen=True)
class LedgerEnd:
    guid: str
    port: int
    name: str
    is_switch: bool
    location: str | None = None  # "row A / rack r3 / U40" from the design
    label: str | None = None  # UFM's port label ("1/17/1")
    done: str | None = None  # what this row's action did to the end: disabled, enabled, skipped (why), failed
    job: str | None = None  # the UFM job that did it: "UFM job 12 Completed (seen after 3.1 s)"

    def key(self) -> str:
        return f"0x{self.guid}[{self.port}]"

    def describe(self) -> str:
        where = f" ({self.location})" if self.location else ""
        return f"{self.name}[{self.port}]{where}"

    def outcome(self) -> str:
        """`describe()` and what was done to it, with the job that did it."""
        return f"{self.describe()}: {self.done}" + (f" ({self.job})" if self.job else "")

    def to_dict(self) -> dict[str, Any]:
        return {"guid": self.guid, "port": self.port, "name": self.name, "is_switch": self.is_switch,
                "location": self.location, "label": self.label, "done": self.done, "job": self.job}

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> LedgerEnd:
        return cls(str(d["guid"]), int(d["port"]), str(d["name"]), bool(d["is_switch"]), d.get("location"),
                   d.get("label"), d.get("done"), d.get("job"))


def link_id(ends: Sequence[LedgerEnd]) -> str:
    """One name per link whichever end is given first: `0x<guid>[<port>]-0x<guid>[<port>]`, sorted."""
    return "-".join(sorted(e.key() for e in ends))


@dataclass(frozen=True)
class LedgerEntry:
    link: str
    at: float
    actor: str
    command: str
    state: str
    via: str  # ufm | ibportstate | dry-run
    why: str
    ends: tuple[LedgerEnd, ...]
    evidence: tuple[Mapping[str, Any], ...] = ()
    ticket: str = ""
    detail: str = ""
    cable: str | None = None
    id: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "link": self.link, "at": self.at, "actor": self.actor, "command": self.command,
                "state": self.state, "via": self.via, "why": self.why, "cable": self.cable,
                "ends": [e.to_dict() for e in self.ends], "evidence": list(self.evidence), "detail": self.detail,
                "ticket": self.ticket}

    def names(self) -> set[str]:
        return {f"{e.name}[{e.port}]" for e in self.ends} | {e.key() for e in self.ends}


class Ledger:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        with store.transaction() as db:
            _create(db)

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        return self.record_many([entry])[0]

    def record_many(self, entries: Iterable[LedgerEntry]) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        with self.store.transaction() as db:
            for e in entries:
                if e.state not in STATES:
                    raise LedgerError(f"unknown ledger state {e.state!r} (states: {', '.join(STATES)})")
                payload = {"cable": e.cable, **dict(e.extra)}
                cur = db.execute(
                    "INSERT INTO port_ledger (link, at, actor, command, state, via, why, ends, evidence, ticket, "
                    "detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (e.link, e.at or time.time(), e.actor, e.command, e.state, e.via, e.why,
                     json.dumps({"ends": [x.to_dict() for x in e.ends], **payload}),
                     json.dumps(list(e.evidence), default=str), e.ticket, e.detail))
                out.append(_with_id(e, int(cur.lastrowid or 0)))
        return out

    def history(self, link: str | None = None) -> list[LedgerEntry]:
        sql = "SELECT * FROM port_ledger" + (" WHERE link = ?" if link else "") + " ORDER BY id"
        return [_entry(r) for r in self.store.reader().execute(sql, (link,) if link else ())]

    def current(self) -> dict[str, LedgerEntry]:
        """Each link's latest row."""
        rows = self.store.reader().execute(
            "SELECT * FROM port_ledger WHERE id IN (SELECT MAX(id) FROM port_ledger GROUP BY link) ORDER BY id")
        return {r["link"]: _entry(r) for r in rows}

    def find(self, spec: str) -> LedgerEntry:
        """The latest row of the link `spec` names: its ledger id, or one end as NAME[PORT] or 0xGUID[PORT]."""
        current = self.current()
        if spec in current:
            return current[spec]
        hits = [e for e in current.values() if spec.strip() in e.names()]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise LedgerError(f"{spec}: no link of the port ledger has this end (fabric ports list shows them)")
        raise LedgerError(f"{spec}: names {len(hits)} links of the ledger; give the link id")


def _create(db: Any) -> None:
    for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
        db.execute(statement)


def _with_id(e: LedgerEntry, row: int) -> LedgerEntry:
    return LedgerEntry(e.link, e.at, e.actor, e.command, e.state, e.via, e.why, e.ends, e.evidence, e.ticket,
                       e.detail, e.cable, row, e.extra)


def _entry(r: Any) -> LedgerEntry:
    ends = json.loads(r["ends"])
    extra = {k: v for k, v in ends.items() if k not in {"ends", "cable"}}
    return LedgerEntry(r["link"], float(r["at"]), r["actor"], r["command"], r["state"], r["via"], r["why"],
                       tuple(LedgerEnd.of(d) for d in ends["ends"]), tuple(json.loads(r["evidence"])), r["ticket"],
                       r["detail"], ends.get("cable"), int(r["id"]), extra)
