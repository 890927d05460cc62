"""Bring a state store to this code's schema on open, in the opener's transaction.

Version 1 had hosts and events only; version 2 adds `host_facts`, back-filled from the history: the
latest `macs_harvested` event's inventory (the facts the harvest saw) and the latest `maas-deploy`
event that names MAAS's `system_id`. A database of a newer version than this code is refused.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from provision.errors import StateError
from provision.state.facts import facts_from_inventory, normalise_fact
from provision.state.facts_table import CREATE, write_facts

SCHEMA_VERSION = 2
MAAS_DEPLOY = "maas-deploy"  # provision.steps.pipeline.MAAS_DEPLOY.name; state may not import the steps package


def upgrade(db: sqlite3.Connection, path: Path) -> None:
    """Create, accept or migrate the schema; `db` is inside a `BEGIN IMMEDIATE` transaction."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:  # a new store
        db.execute(CREATE)
        db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return
    version = int(row[0]) if str(row[0]).isdigit() else None
    if version == SCHEMA_VERSION:
        return
    if version != 1:
        raise StateError(f"{path} has schema version {row[0]}, this bringup expects {SCHEMA_VERSION}")
    db.execute(CREATE)
    for hostname, updates, command, ts in _facts_in_history(db):
        write_facts(db, hostname, updates, command=command, at=ts)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def _valid(updates: dict[str, Any]) -> dict[str, Any]:
    """The facts whose values are valid: an odd value in an old event is left in the event, not
    allowed to stop the store from opening."""
    out = {}
    for name, value in updates.items():
        try:
            out[name] = normalise_fact(name, value)
        except StateError:
            continue
    return out


def _facts_in_history(db: sqlite3.Connection) -> list[tuple[str, dict[str, Any], str, float]]:
    """(host, facts, command, ts) from the events that carry facts, oldest first (later ones win)."""
    harvests = db.execute(
        "SELECT id, host, command, ts, evidence FROM events WHERE id IN "
        "(SELECT max(id) FROM events WHERE to_state = 'macs_harvested' GROUP BY host)"
    ).fetchall()
    found: list[tuple[int, str, dict[str, Any], str, float]] = []
    for event_id, host, command, ts, evidence in harvests:
        inventory = _loads(evidence).get("inventory")
        if isinstance(inventory, dict) and (updates := _valid(facts_from_inventory(inventory))):
            found.append((event_id, host, updates, command, ts))
    latest_system_id: dict[str, tuple[int, str, float, str]] = {}
    for event_id, host, command, ts, evidence in db.execute(
        "SELECT id, host, command, ts, evidence FROM events WHERE command = ? AND evidence IS NOT NULL ORDER BY id",
        (MAAS_DEPLOY,),
    ):
        system_id = _loads(evidence).get("system_id")
        if isinstance(system_id, str) and system_id:
            latest_system_id[host] = (event_id, command, ts, system_id)
    for host, (event_id, command, ts, system_id) in latest_system_id.items():
        if updates := _valid({"maas_system_id": system_id}):
            found.append((event_id, host, updates, command, ts))
    return [(host, updates, command, ts) for _, host, updates, command, ts in sorted(found, key=lambda f: f[0])]


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
