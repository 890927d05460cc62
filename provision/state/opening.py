"""Opening a state store: is the file ours, whose site is it, can it be written, is its schema whole.

Whose site: a store records the site it belongs to in its `meta` table, the site's name and a site id.
The id is the first 16 hex digits of sha256(`<name>\\0<resolved path of the site file>`): two sites of
the same name in two directories are two sites. A store opened for another site is refused unless
adopted (`provision db adopt`). One case is let through and re-recorded: the same name, and the
recorded site file no longer exists (the site's directory was moved, its store with it).

Not ours: an SQLite file with tables but no `meta` table holding a schema version is another
program's database, and is refused before anything is written to it. A store whose schema version
is known but that lacks one of its tables is damaged, not new: the table is not silently re-created
(that would answer an empty history).

Read-only: a store whose file or directory cannot be written is opened with SQLite's `mode=ro` (and,
when even its `-shm` cannot be made, `immutable=1`): reads work, a write says the store is read-only.
Opening never writes when nothing needs writing (no schema to create or migrate, no site to record),
so `provision status` takes no write lock.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from provision.errors import StateError
from provision.state.integrity import damaged, quick_check
from provision.state.migrate import SCHEMA_VERSION

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (
    hostname    TEXT PRIMARY KEY,
    rack        TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    reason      TEXT,
    resume_from TEXT,
    evidence    TEXT,
    updated_at  REAL NOT NULL,
    in_site     INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         REAL NOT NULL,
    host       TEXT NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    command    TEXT NOT NULL,
    reason     TEXT,
    evidence   TEXT,
    actor      TEXT NOT NULL,
    override   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_host ON events (host, id);
"""

TABLES = ("meta", "hosts", "events", "host_facts")
SCHEMA_V1_TABLES = ("meta", "hosts", "events")


class ForeignStore(StateError):
    """The file is not a bringup state store, or belongs to another site."""


@dataclass(frozen=True)
class SiteIdentity:
    name: str
    site_file: str  # resolved path

    @classmethod
    def of(cls, name: str, site_file: Path) -> SiteIdentity:
        return cls(name, str(site_file.resolve()))

    @property
    def site_id(self) -> str:
        return hashlib.sha256(f"{self.name}\0{self.site_file}".encode()).hexdigest()[:16]


def wants_read_only(path: Path) -> bool:
    """An existing store this process may not write (file or directory mode, or a read-only mount)."""
    if not path.exists():
        return False
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return True
    try:
        return os.statvfs(path.parent).f_flag & os.ST_RDONLY != 0
    except OSError:
        return False


def connect(path: Path, *, read_only: bool, busy_ms: int) -> sqlite3.Connection:
    """A connection to the store: read-only (see `connect_read_only`), or `synchronous=FULL` (WAL is set on
    the file by the store once it knows the file is its own: the journal mode is written into the file)."""
    if read_only:
        return connect_read_only(path, busy_ms / 1000)
    conn = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def connect_read_only(path: Path, timeout_s: float) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout_s, isolation_level=None,
                               check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        # WAL without a -shm that can be made in a read-only directory: nobody can write here either.
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=timeout_s, isolation_level=None,
                               check_same_thread=False)
        return conn


def tables(conn: sqlite3.Connection, path: Path) -> set[str]:
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise ForeignStore(f"{path} is not a bringup state store: {exc}") from None


def schema_version(conn: sqlite3.Connection, path: Path, found: set[str]) -> str | None:
    """The store's schema version; None for an empty file (a new store). Refuses a foreign database and
    a store with tables missing."""
    if not found:
        return None
    row = None
    if "meta" in found:
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise damaged(path, str(exc)) from None
    if row is None:
        if problems := quick_check(conn):  # our tables but no version: a damaged store, not a foreign one
            raise damaged(path, "; ".join(problems[:3]))
        raise ForeignStore(
            f"{path} is an SQLite database of another program (tables: {', '.join(sorted(found))}; no bringup "
            f"schema version): refusing to use it as a state store; pass the right --db")
    version = str(row[0])
    needed = SCHEMA_V1_TABLES if version == "1" else TABLES if version == str(SCHEMA_VERSION) else ()  # others: upgrade
    missing = [t for t in needed if t not in found]
    if missing:
        raise damaged(path, f"table {', '.join(missing)} is missing")
    return version


def recorded_site(conn: sqlite3.Connection) -> dict[str, str]:
    rows = conn.execute("SELECT key, value FROM meta WHERE key IN ('site_name', 'site_id', 'site_file')")
    return {str(k): str(v) for k, v in rows}


def site_problem(recorded: dict[str, str], site: SiteIdentity, path: Path) -> str | None:
    """Why `site` may not use this store (None: it may, recording itself when `claim_needed`)."""
    if not recorded or recorded.get("site_id") == site.site_id:
        return None
    if recorded.get("site_name") == site.name and not Path(recorded.get("site_file", "")).exists():
        return None  # the site (and its store) moved: the old site file is gone
    return (f"{path} is the state store of site {recorded.get('site_name')!r} ({recorded.get('site_file')}, "
            f"id {recorded.get('site_id')}), not of site {site.name!r} ({site.site_file}, id {site.site_id}): "
            f"pass this site's --db, or take the store over with "
            f"`provision db adopt --site {site.site_file} --db {path}`")


def claim_needed(recorded: dict[str, str], site: SiteIdentity) -> bool:
    return recorded.get("site_id") != site.site_id


def record_site(db: sqlite3.Connection, site: SiteIdentity) -> None:
    """Write `site` as the store's site (inside the caller's write transaction)."""
    db.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [("site_name", site.name), ("site_id", site.site_id), ("site_file", site.site_file)],
    )


def create_schema(db: sqlite3.Connection) -> None:
    """The tables of a new store (inside the caller's write transaction; `IF NOT EXISTS` for a racing opener)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
