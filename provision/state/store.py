"""The lifecycle state store: one SQLite file (WAL) per site.

One row per host with its current state, and an append-only event history. Every write is a single
`BEGIN IMMEDIATE` transaction that reads the current state, validates the move and appends the event,
so writers in several threads or processes serialise on SQLite's lock and none is lost. With WAL and
`synchronous=FULL`, an event is on disk when `transition` returns: a `kill -9` afterwards loses nothing.
Host facts (`provision.state.facts`) are current values in their own table, written in the same
transaction as the move that learnt them; opening an older store migrates it (`provision.state.migrate`).
What opening checks (whose site, read-only, schema) is `opening.py`; damage and backups `integrity.py`.
"""

from __future__ import annotations

import getpass
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from provision.errors import IllegalTransition, StateError, UnknownHost
from provision.state.facts import HostFacts
from provision.state.facts_table import read_facts, read_many, write_facts
from provision.state.integrity import damaged, guarded, quick_check, read_failure
from provision.state.intent_table import Outcome, close_rows, this_run
from provision.state.lifecycle import State, check_transition, parse_state, reached
from provision.state.migrate import SCHEMA_VERSION, upgrade
from provision.state.opening import (
    ForeignStore,
    SiteIdentity,
    claim_needed,
    connect,
    create_schema,
    record_site,
    recorded_site,
    schema_version,
    site_problem,
    tables,
    wants_read_only,
)
from provision.state.records import Change, Event, HostRecord, Move, counts, dumps, event, host_record
from provision.state.redact import masked_writes

__all__ = ["SCHEMA_VERSION", "Change", "Event", "HostRecord", "Move", "StateStore", "counts"]
_REASON = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

def _default_actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _current(db: sqlite3.Connection, hostname: str) -> HostRecord:
    row = db.execute("SELECT * FROM hosts WHERE hostname = ?", (hostname,)).fetchone()
    if row is None:
        raise UnknownHost(f"host {hostname!r} is not in the state store (is it in the site file?)")
    return host_record(row)


class StateStore:
    """Thread-safe: each thread gets its own connection; processes serialise on SQLite's lock."""

    def __init__(self, path: Path | str, *, actor: str | None = None, busy_timeout_s: float = 30.0,
                 site: SiteIdentity | None = None, adopt: bool = False, create_directory: bool = True) -> None:
        """`site`: recorded in a new store, checked in an existing one (`adopt` takes another site's over);
        `create_directory`: False for a path the operator typed (a typo is an error, not a new tree)."""
        self.path = Path(path)
        self.actor = actor or _default_actor()
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if not self.path.parent.is_dir():
            if not create_directory:
                raise StateError(f"cannot open the state store {self.path}: directory {self.path.parent} does not "
                                 f"exist (only a site's default state directory is created; check the path)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StateError(f"cannot create the state directory {self.path.parent}: {exc}") from None
        self.read_only = wants_read_only(self.path)
        self._checked = self.read_only  # quick_check before the first write; a read-only store never writes
        self._open(site, adopt)

    # connections ---------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = connect(self.path, read_only=self.read_only, busy_ms=self._busy_ms)
            except sqlite3.Error as exc:
                raise read_failure(self.path, exc) from None
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StateError(f"state store {self.path} is read-only here (file, directory or mount): this command "
                             f"writes; reading commands (status, history) work")
        conn = self._conn()
        if not self._checked:
            problems = quick_check(conn)
            if problems:
                raise damaged(self.path, "; ".join(problems[:3]))
            self._checked = True
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path} is locked or unreadable: {exc}") from None
        try:
            with guarded(self.path):
                yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def _open(self, site: SiteIdentity | None, adopt: bool) -> None:
        """Refuse what is not ours or another site's; create, migrate or claim only when needed."""
        conn = self._conn()
        version = schema_version(conn, self.path, tables(conn, self.path))
        recorded = recorded_site(conn) if version is not None else {}
        if site is not None and not adopt and (problem := site_problem(recorded, site, self.path)):
            raise ForeignStore(problem)
        claim = site is not None and claim_needed(recorded, site)
        if not self.read_only:
            conn.execute("PRAGMA journal_mode = WAL")  # persistent: a no-op on a store that is WAL already
        if version == str(SCHEMA_VERSION) and not claim:
            return  # the common case: nothing to write, no write lock taken
        if self.read_only:
            if version != str(SCHEMA_VERSION):
                raise StateError(f"state store {self.path} is read-only here and needs "
                                 f"{'creating' if version is None else 'migrating'}: open it once where it is writable")
            return
        with self._tx() as db:
            if version is None:
                create_schema(db)
            upgrade(db, self.path)
            if site is not None and claim:
                record_site(db, site)

    def recorded_site(self) -> dict[str, str]:
        """site_name, site_id and site_file of the store's site (empty: none recorded yet)."""
        with self._guard():
            return recorded_site(self._conn())

    def _guard(self) -> AbstractContextManager[None]:
        return guarded(self.path)

    # tables of other packages (the port ledger, burn-in history) ---------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A `BEGIN IMMEDIATE` transaction on this store's file, for a package that keeps a table of its
        own beside the lifecycle (it creates the table with `CREATE TABLE IF NOT EXISTS` in here).
        Committed on success, rolled back on any exception; writers serialise as the lifecycle's do. Its
        tables hold peers' text: every held secret is masked in what it binds (`redact.masked_writes`)."""
        with self._tx() as db:
            yield masked_writes(db)

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads of such a table (rows as `sqlite3.Row`)."""
        return self._conn()

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # reads ---------------------------------------------------------------------------------------

    def get(self, hostname: str) -> HostRecord:
        with self._guard():
            return _current(self._conn(), hostname)

    def hosts(self) -> list[HostRecord]:
        with self._guard():
            rows = self._conn().execute("SELECT * FROM hosts ORDER BY rack, hostname").fetchall()
            return [host_record(row) for row in rows]

    def history(self, hostname: str) -> list[Event]:
        self.get(hostname)
        with self._guard():
            rows = self._conn().execute("SELECT * FROM events WHERE host = ? ORDER BY id", (hostname,)).fetchall()
            return [event(row) for row in rows]

    def event_count(self) -> int:
        with self._guard():
            return int(self._conn().execute("SELECT count(*) FROM events").fetchone()[0])

    def facts(self, hostname: str) -> HostFacts:
        """The host's facts (empty when none were learnt yet); UnknownHost for a host the store lacks."""
        with self._guard():
            db = self._conn()
            _current(db, hostname)
            return read_facts(db, hostname)

    def facts_many(self, hostnames: Iterable[str] | None = None) -> dict[str, HostFacts]:
        """Facts by hostname, for these hosts or (None) every host of the store, in one query."""
        wanted = None if hostnames is None else list(hostnames)
        with self._guard():
            found = read_many(self._conn(), wanted)
        missing = sorted(set(wanted or ()) - found.keys())
        if missing:
            raise UnknownHost(f"not in the state store (are they in the site file?): {', '.join(missing)}")
        return found

    def in_state(self, state: State) -> list[str]:
        with self._guard():
            rows = self._conn().execute(
                "SELECT hostname FROM hosts WHERE state = ? AND in_site = 1 ORDER BY hostname", (state.value,)
            ).fetchall()
        return [row[0] for row in rows]

    # writes --------------------------------------------------------------------------------------

    def sync_site(self, hosts: Iterable[tuple[str, str]], *, command: str = "site") -> int:
        """Declare every (hostname, rack) of the site that the store does not know yet.

        Hosts the store knows but the site no longer lists stay (their history matters) but are
        flagged `in_site = 0`. Returns how many hosts were newly declared.
        """
        wanted = dict(hosts)
        now = time.time()
        with self._guard():
            current = {
                row[0]: (row[1], row[2]) for row in self._conn().execute("SELECT hostname, rack, in_site FROM hosts")
            }
        if current.keys() == wanted.keys() and all(
            rack == wanted[h] and flag == 1 for h, (rack, flag) in current.items()
        ):
            return 0  # nothing to write: the common case, and it costs no fsync
        with self._tx() as db:
            known = {row[0]: row[1] for row in db.execute("SELECT hostname, rack FROM hosts")}
            new = [(h, r) for h, r in wanted.items() if h not in known]
            db.executemany(
                "INSERT INTO hosts (hostname, rack, state, updated_at) VALUES (?, ?, 'declared', ?)",
                [(h, r, now) for h, r in new],
            )
            db.executemany(
                "INSERT INTO events (ts, host, from_state, to_state, command, actor) "
                "VALUES (?, ?, NULL, 'declared', ?, ?)",
                [(now, h, command, self.actor) for h, _ in new],
            )
            moved = [(r, h) for h, r in wanted.items() if h in known and known[h] != r]
            db.executemany("UPDATE hosts SET rack = ? WHERE hostname = ?", moved)
            db.execute("UPDATE hosts SET in_site = 0")
            db.executemany("UPDATE hosts SET in_site = 1 WHERE hostname = ?", [(h,) for h in wanted])
        return len(new)

    def _apply(self, db: sqlite3.Connection, change: Change, now: float) -> Move:
        current = _current(db, change.host)
        if change.settles:  # the record of the changes asked of peers: closed with it, or not at all
            close_rows(db, change.settles, Outcome.recorded, {"state": change.to.value, "reason": change.reason},
                       run=this_run(), at=now)
        if change.to is State.failed:
            if not change.reason or not _REASON.match(change.reason):
                raise StateError(
                    f"{change.host}: a failure needs a machine-readable reason like 'bmc_auth' "
                    f"(got {change.reason!r})"
                )
        elif reached(current.state, change.to):
            # Facts are current values: what a re-run learnt is recorded though the state stays.
            if change.facts:
                write_facts(db, change.host, change.facts, command=change.command, at=now)
            return Move(change.host, current.state, current.state, changed=False)
        try:
            check_transition(current.state, change.to, current.resume_from, change.may_skip)
        except IllegalTransition as exc:
            raise IllegalTransition(f"{change.host}: {exc}") from None
        if change.facts:
            write_facts(db, change.host, change.facts, command=change.command, at=now)
        self._write(db, current, change.to, change.command, change.reason, change.evidence, now, False)
        return Move(change.host, current.state, change.to, changed=True)

    def _write(
        self,
        db: sqlite3.Connection,
        current: HostRecord,
        target: State,
        command: str,
        reason: str | None,
        evidence: Any,
        now: float,
        override: bool,
    ) -> None:
        blob = dumps(evidence)
        if target is State.failed:
            resume = current.resume_from if current.state is State.failed else current.state
        else:
            resume = None
        db.execute(
            "UPDATE hosts SET state = ?, reason = ?, resume_from = ?, evidence = ?, updated_at = ? "
            "WHERE hostname = ?",
            (
                target.value,
                reason if target is State.failed or override else None,
                resume.value if resume else None,
                blob,
                now,
                current.hostname,
            ),
        )
        db.execute(
            "INSERT INTO events (ts, host, from_state, to_state, command, reason, evidence, actor, override) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                now,
                current.hostname,
                current.state.value,
                target.value,
                command,
                reason,
                blob,
                self.actor,
                int(override),
            ),
        )

    def transition(
        self,
        hostname: str,
        to: State | str,
        *,
        command: str,
        reason: str | None = None,
        evidence: Any = None,
        may_skip: frozenset[State] = frozenset(),
        facts: Mapping[str, Any] | None = None,
    ) -> Move:
        """Move a host along the lifecycle, validated, writing `facts` with the move. Re-asking for a
        state already reached changes no state (the facts are still written)."""
        target = to if isinstance(to, State) else parse_state(to)
        change = Change(hostname, target, command, reason, evidence, may_skip, facts)
        with self._tx() as db:
            return self._apply(db, change, time.time())

    def fail(self, hostname: str, reason: str, *, command: str, evidence: Any = None) -> Move:
        return self.transition(hostname, State.failed, command=command, reason=reason, evidence=evidence)

    def transition_many(self, changes: Iterable[Change]) -> list[Move]:
        """Apply several moves in one transaction: all are written, or (on an illegal one) none."""
        now = time.time()
        with self._tx() as db:
            return [self._apply(db, change, now) for change in changes]

    def set_facts(self, hostname: str, *, command: str, **updates: Any) -> HostFacts:
        """Write the given facts of a host (None clears one; the others are kept); its facts after."""
        with self._tx() as db:
            _current(db, hostname)
            write_facts(db, hostname, updates, command=command, at=time.time())
            return read_facts(db, hostname)

    def mark(self, hostname: str, to: State | str, *, reason: str, command: str = "mark") -> Move:
        """Operator override: any state, recorded as an override with the operator's reason."""
        target = to if isinstance(to, State) else parse_state(to)
        if not reason.strip():
            raise StateError("an override needs --reason: say why, it goes into the host's history")
        if target is State.failed and not _REASON.match(reason):
            raise StateError("marking a host failed needs a machine-readable reason like 'pcie_width_x4'")
        with self._tx() as db:
            current = _current(db, hostname)
            self._write(db, current, target, command, reason, {"override": True}, time.time(), True)
        return Move(hostname, current.state, target, changed=current.state is not target)

    # asyncio -------------------------------------------------------------------------------------

    async def atransition(self, hostname: str, to: State | str, **options: Any) -> Move:
        """`transition` (same keyword options) from asyncio code without blocking the event loop: it runs in a
        worker thread. Fan-outs record through the step runner's group commit instead."""
        import asyncio  # only asyncio callers need it; plain CLI commands skip its import cost

        return await asyncio.to_thread(lambda: self.transition(hostname, to, **options))

