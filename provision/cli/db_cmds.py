"""`provision db check|backup|restore|adopt`: the state database's health, its backups, whose site it is."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.app import app, common_options
from provision.command.context import default_site_path, state_path
from provision.command.exits import ProblemsFound
from provision.command.options import Common
from provision.command.output import console, emit_json, esc
from provision.errors import StateError
from provision.site.index import SiteIndex, load_index
from provision.site.store import open_store
from provision.state.integrity import DamagedStore, backup, check_backup, integrity_check, restore, restore_advice
from provision.state.lifecycle import State
from provision.state.opening import (
    ForeignStore,
    SiteIdentity,
    connect_read_only,
    recorded_site,
    schema_version,
    site_problem,
    tables,
)

db_app = typer.Typer(help="The state database: check it, back it up, restore it, adopt another site's.",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


def _site(common: Common) -> SiteIndex:
    return load_index(common.site or default_site_path())


def _bad_states(conn: sqlite3.Connection) -> list[str]:
    known = {s.value for s in State}
    found: list[str] = []
    for column, table in (("state", "hosts"), ("to_state", "events"), ("from_state", "events")):
        for (value,) in conn.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL"):
            if value not in known:
                found.append(f"{table}.{column} holds {value!r}, which is no lifecycle state")
    return found


def check_file(path: Path, site: SiteIdentity) -> dict[str, Any]:
    """What is wrong with the store at `path` (read-only: nothing is written, not even a lock)."""
    if not path.is_file():
        raise StateError(f"state store {path} not found")
    problems: list[str] = []
    recorded: dict[str, str] = {}
    conn = connect_read_only(path, 5.0)
    try:
        version = schema_version(conn, path, tables(conn, path))
        problems += integrity_check(conn)
        if version is not None and not problems:
            recorded = recorded_site(conn)
            problems += _bad_states(conn)
        if problem := site_problem(recorded, site, path):
            problems.append(problem)
    except (DamagedStore, ForeignStore) as exc:
        problems.append(str(exc))
    except sqlite3.Error as exc:
        problems.append(str(exc))
    finally:
        conn.close()
    return {"db": str(path), "ok": not problems, "problems": problems, "site": recorded}


@db_app.command("check")
@common_options
def check(*, common: Common) -> None:
    """Check the whole database (PRAGMA integrity_check, schema, state values, site); exit 2 when damaged."""
    index = _site(common)
    path = state_path(index, common.db)
    report = check_file(path, SiteIdentity.of(index.name, index.path))
    if common.json_out:
        emit_json(report)
    elif report["ok"]:
        console.print(f"{esc(path)}: ok")
    else:
        for problem in report["problems"]:
            console.print(f"[red]{esc(path)}: {esc(problem)}[/]")
        console.print(esc(restore_advice(path)))
    if not report["ok"]:
        raise ProblemsFound(f"state store {path} has {len(report['problems'])} problem(s)")


ToOpt = Annotated[Path | None, typer.Option("--to", help="Backup file (default: <db>.<UTC time>.bak beside it).")]


@db_app.command("backup")
@common_options
def backup_cmd(to: ToOpt = None, *, common: Common) -> None:
    """Copy the database with SQLite's online backup API (consistent while other commands write)."""
    index = _site(common)
    with open_store(index, common.db) as store:
        target = to or store.path.with_name(f"{store.path.name}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.bak")
        done = backup(store.reader(), target)
    if common.json_out:
        emit_json({"db": str(store.path), "backup": str(done)})
    else:
        console.print(f"backed up {esc(store.path)} to {esc(done)}")


@db_app.command("restore")
@common_options
def restore_cmd(source: Annotated[Path, typer.Argument(help="A backup made by `provision db backup`.")], *,
                common: Common) -> None:
    """Replace the database with a backup (checked first); the replaced file is kept as <db>.damaged."""
    index = _site(common)
    path = state_path(index, common.db)
    check_backup(source)
    conn = connect_read_only(source, 5.0)
    try:
        problem = site_problem(recorded_site(conn), SiteIdentity.of(index.name, index.path), source)
    finally:
        conn.close()
    if problem:
        raise ForeignStore(problem)
    restore(source, path)
    if common.json_out:
        emit_json({"db": str(path), "restored_from": str(source)})
    else:
        console.print(f"restored {esc(path)} from {esc(source)}")


@db_app.command("adopt")
@common_options
def adopt(*, common: Common) -> None:
    """Make this site the database's site (a store another site recorded, or one moved between sites)."""
    index = _site(common)
    with open_store(index, common.db, adopt=True) as store:
        site = store.recorded_site()
    if common.json_out:
        emit_json({"db": str(store.path), "site": site})
    else:
        console.print(f"{esc(store.path)} is now the state store of site {esc(site.get('site_name'))}")
