"""A state store's health: damage is named with the file and how to restore it; backups and restores.

SQLite finds damage in three ways: `PRAGMA quick_check` (pages, b-trees; run before the first write of
a process, and by `provision db check`), an error while reading ("database disk image is malformed",
a table that is gone), and values no bringup writes (a state that is not a lifecycle state). Each
becomes a `DamagedStore` saying which file and what to do: restore a backup made with `backup`, which
uses SQLite's online backup API (consistent while other processes write, WAL included).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from provision.errors import StateError

CHECK_ROWS = 20  # quick_check lists at most this many problems


class DamagedStore(StateError):
    """The state database is damaged (or was edited into something bringup never writes)."""


class UnknownStateValue(DamagedStore):
    """A row holds a value no bringup writes (a state that is no lifecycle state)."""


def restore_advice(path: Path) -> str:
    return (f"restore a backup with `provision db restore BACKUP --db {path}` (backups are made by "
            f"`provision db backup`), or move the file aside to start a new store")


def damaged(path: Path, what: str) -> DamagedStore:
    return DamagedStore(f"state store {path} is damaged: {what}; {restore_advice(path)}")


def read_failure(path: Path, exc: sqlite3.Error) -> StateError:
    """What an SQLite error while reading or writing `path` means for the operator."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StateError(f"state store {path} is locked by another process: {text}")
    if "readonly" in text or "read-only" in text:
        return StateError(f"state store {path} is read-only here (this command writes): {text}")
    if "not a database" in text:
        return DamagedStore(f"{path} is not a bringup state store (SQLite: {text}); if it was one, its header is "
                            f"damaged: {restore_advice(path)}")
    return damaged(path, text)


@contextmanager
def guarded(path: Path) -> Iterator[None]:
    """Reads of `path`: SQLite's errors and values no bringup writes become one line naming the file."""
    try:
        yield
    except sqlite3.Error as exc:
        raise read_failure(path, exc) from None
    except UnknownStateValue as exc:
        raise damaged(path, str(exc)) from None


def _pragma_check(conn: sqlite3.Connection, pragma: str) -> list[str]:
    try:
        rows = conn.execute(f"PRAGMA {pragma}({CHECK_ROWS})").fetchall()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found


def quick_check(conn: sqlite3.Connection) -> list[str]:
    """The problems `PRAGMA quick_check` finds (empty when the file is sound)."""
    return _pragma_check(conn, "quick_check")


def integrity_check(conn: sqlite3.Connection) -> list[str]:
    """The problems the full `PRAGMA integrity_check` finds (also index contents); for `db check`."""
    return _pragma_check(conn, "integrity_check")


def _copy(source: sqlite3.Connection, target_path: Path) -> None:
    target = sqlite3.connect(target_path)
    try:
        source.backup(target)
    finally:
        target.close()


def backup(conn: sqlite3.Connection, to: Path) -> Path:
    """Copy the store open on `conn` to `to` (a new file, 0600) with the online backup API."""
    if to.exists():
        raise StateError(f"{to} exists: a backup never overwrites a file (remove it or choose another)")
    if not to.parent.is_dir():
        raise StateError(f"cannot write the backup {to}: directory {to.parent} does not exist")
    tmp = to.with_name(f".{to.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        _copy(conn, tmp)
        os.replace(tmp, to)
    except (sqlite3.Error, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise StateError(f"backup of the state store to {to} failed: {exc}") from None
    return to


def check_backup(source: Path) -> None:
    """Refuse to restore from a file that is not a sound bringup state store."""
    if not source.is_file():
        raise StateError(f"backup {source} not found")
    try:
        conn = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StateError(f"cannot open the backup {source}: {exc}") from None
    try:
        problems = quick_check(conn)
        if problems:
            raise StateError(f"backup {source} is damaged too: {'; '.join(problems)}")
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is None:
            raise StateError(f"{source} is not a bringup state store (no schema version): not restored")
    finally:
        conn.close()


def restore(source: Path, path: Path) -> None:
    """Replace the store at `path` with the backup `source` (checked first; the old file is kept aside)."""
    check_backup(source)
    if not path.parent.is_dir():
        raise StateError(f"cannot restore to {path}: directory {path.parent} does not exist")
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StateError(f"cannot open the backup {source}: {exc}") from None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.restore")
    tmp.unlink(missing_ok=True)
    try:
        _copy(src, tmp)
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StateError(f"restore from {source} failed: {exc}") from None
    finally:
        src.close()
    os.chmod(tmp, 0o600)
    aside = path.with_name(f"{path.name}.damaged")
    if path.exists():
        os.replace(path, aside)
    if Path(f"{path}-wal").exists():
        os.replace(f"{path}-wal", f"{aside}-wal")  # the old file's log goes aside with it
    Path(f"{path}-shm").unlink(missing_ok=True)
    os.replace(tmp, path)
