"""The burn-in's own tables in the state store: runs, finished stages, per-flow Gb/s, per-port counter
deltas, and each link's verdict per run (the nightly history).

A run is keyed by the digest of its plan and options: `fabric burnin run` on the same plan finds the
unfinished run and resumes at the first stage not marked done; a stage's flows, port deltas and its
`done` mark are written in one transaction, so a run killed mid-stage has nothing of that stage and
redoes exactly it. Everything here goes through `StateStore.transaction()` / `reader()`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from provision.state import StateStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS burnin_run (
    id INTEGER PRIMARY KEY AUTOINCREMENT, digest TEXT NOT NULL, kind TEXT NOT NULL, night TEXT,
    started REAL NOT NULL, finished REAL, duration_s INTEGER NOT NULL, gpudirect INTEGER NOT NULL,
    stages INTEGER NOT NULL, plan TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS burnin_run_digest ON burnin_run (digest, finished);
CREATE TABLE IF NOT EXISTS burnin_stage (
    run INTEGER NOT NULL REFERENCES burnin_run(id), stage INTEGER NOT NULL, started REAL NOT NULL,
    finished REAL NOT NULL, PRIMARY KEY (run, stage));
CREATE TABLE IF NOT EXISTS burnin_flow (
    run INTEGER NOT NULL REFERENCES burnin_run(id), stage INTEGER NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,
    src_name TEXT NOT NULL, dst_name TEXT NOT NULL, gbps REAL, status TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (run, stage, src, dst));
CREATE TABLE IF NOT EXISTS burnin_port (
    run INTEGER NOT NULL REFERENCES burnin_run(id), stage INTEGER NOT NULL, guid TEXT NOT NULL, port INTEGER NOT NULL,
    counter TEXT NOT NULL, delta INTEGER, status TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (run, stage, guid, port, counter));
CREATE TABLE IF NOT EXISTS burnin_link (
    run INTEGER NOT NULL REFERENCES burnin_run(id), night TEXT, link TEXT NOT NULL, name TEXT NOT NULL,
    verdict TEXT NOT NULL, gbps REAL, errors INTEGER NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (run, link));
CREATE INDEX IF NOT EXISTS burnin_link_by_link ON burnin_link (link, at);
"""


@dataclass(frozen=True, slots=True)
class FlowRow:
    stage: int
    src: str
    dst: str
    src_name: str
    dst_name: str
    gbps: float | None
    status: str  # ok | unknown
    reason: str


@dataclass(frozen=True, slots=True)
class PortRow:
    stage: int
    guid: str
    port: int
    counter: str  # a fabric.ports.counters name, or "*" for a port whose counters could not be read
    delta: int | None
    status: str  # ok | unknown
    reason: str


@dataclass(frozen=True, slots=True)
class LinkRow:
    run: int
    night: str | None
    link: str
    name: str
    verdict: str
    gbps: float | None
    errors: int
    reason: str
    at: float


def plan_digest(plan: dict[str, Any], duration_s: int, gpudirect: bool) -> str:
    body = json.dumps({"stages": plan.get("stages"), "d": duration_s, "g": gpudirect}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:32]


class History:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        with store.transaction() as db:
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                db.execute(statement)

    def open_run(self, plan: dict[str, Any], duration_s: int, gpudirect: bool, *, kind: str = "run",
                 night: str | None = None, resume: bool = True) -> tuple[int, frozenset[int]]:
        """(run id, stages already done): the unfinished run of this plan, else a new one."""
        digest = plan_digest(plan, duration_s, gpudirect)
        with self.store.transaction() as db:
            row = db.execute("SELECT id FROM burnin_run WHERE digest = ? AND finished IS NULL AND kind = ? "
                             "ORDER BY id DESC LIMIT 1", (digest, kind)).fetchone() if resume else None
            if row is None:
                cur = db.execute("INSERT INTO burnin_run (digest, kind, night, started, duration_s, gpudirect, "
                                 "stages, plan) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (digest, kind, night, time.time(), duration_s, int(gpudirect),
                                  len(plan.get("stages", [])), json.dumps(plan)))
                return int(cur.lastrowid or 0), frozenset()
            run = int(row[0])
            done = {int(r[0]) for r in db.execute("SELECT stage FROM burnin_stage WHERE run = ?", (run,))}
        return run, frozenset(done)

    def finish_stage(self, run: int, stage: int, started: float, flows: Iterable[FlowRow],
                     ports: Iterable[PortRow]) -> None:
        with self.store.transaction() as db:
            db.execute("DELETE FROM burnin_flow WHERE run = ? AND stage = ?", (run, stage))
            db.execute("DELETE FROM burnin_port WHERE run = ? AND stage = ?", (run, stage))
            db.executemany("INSERT INTO burnin_flow VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run, stage, f.src, f.dst, f.src_name, f.dst_name, f.gbps, f.status, f.reason)
                            for f in flows])
            db.executemany("INSERT OR REPLACE INTO burnin_port VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run, stage, p.guid, p.port, p.counter, p.delta, p.status, p.reason) for p in ports])
            db.execute("INSERT OR REPLACE INTO burnin_stage VALUES (?, ?, ?, ?)", (run, stage, started, time.time()))

    def extend_plan(self, run: int, plan: dict[str, Any]) -> None:
        """The run's plan with stages added (a retry round): a resumed run runs those too."""
        with self.store.transaction() as db:
            db.execute("UPDATE burnin_run SET plan = ?, stages = ? WHERE id = ?",
                       (json.dumps(plan), len(plan.get("stages", [])), run))

    def done_stages(self, run: int) -> frozenset[int]:
        return frozenset(int(r[0]) for r in self._read("SELECT stage FROM burnin_stage WHERE run = ?", (run,)))

    def finish_run(self, run: int) -> None:
        with self.store.transaction() as db:
            db.execute("UPDATE burnin_run SET finished = ? WHERE id = ?", (time.time(), run))

    def flows(self, run: int) -> list[FlowRow]:
        rows = self._read("SELECT stage, src, dst, src_name, dst_name, gbps, status, reason FROM burnin_flow "
                          "WHERE run = ? ORDER BY stage, src_name", (run,))
        return [FlowRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows]

    def ports(self, run: int) -> list[PortRow]:
        rows = self._read("SELECT stage, guid, port, counter, delta, status, reason FROM burnin_port WHERE run = ? "
                          "ORDER BY stage, guid, port, counter", (run,))
        return [PortRow(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6]) for r in rows]

    def run_plan(self, run: int) -> dict[str, Any]:
        rows = self._read("SELECT plan FROM burnin_run WHERE id = ?", (run,))
        if not rows:
            raise KeyError(run)
        plan: dict[str, Any] = json.loads(rows[0][0])
        return plan

    def latest_run(self, kind: str | None = None) -> int | None:
        sql = "SELECT id FROM burnin_run" + (" WHERE kind = ?" if kind else "") + " ORDER BY id DESC LIMIT 1"
        rows = self._read(sql, (kind,) if kind else ())
        return int(rows[0][0]) if rows else None

    def record_links(self, run: int, night: str | None, links: Sequence[LinkRow]) -> None:
        with self.store.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO burnin_link VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run, night, lk.link, lk.name, lk.verdict, lk.gbps, lk.errors, lk.reason, lk.at)
                            for lk in links])

    def link_history(self, links: Iterable[str] | None = None) -> dict[str, list[LinkRow]]:
        """Per link, every recorded verdict, oldest first."""
        rows = self._read("SELECT run, night, link, name, verdict, gbps, errors, reason, at FROM burnin_link "
                          "ORDER BY at, run", ())
        wanted = None if links is None else set(links)
        out: dict[str, list[LinkRow]] = {}
        for r in rows:
            if wanted is None or r[2] in wanted:
                out.setdefault(r[2], []).append(LinkRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], int(r[6]), r[7],
                                                        float(r[8])))
        return out

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[sqlite3.Row]:
        return list(self.store.reader().execute(sql, args).fetchall())
