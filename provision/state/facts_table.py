"""The `host_facts` table: one row per host, a column per fact (macs and hca_guids as JSON text).

Writes go through `write_facts`, inside the caller's transaction: the given facts are redacted (a BMC
is a peer that may echo anything), checked, and upserted column by column, so the facts not given keep
their values and the merge costs no read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from provision.state.facts import FACT_NAMES, HostFacts, normalise_facts, typed
from provision.state.redact import redact

_JSON_FACTS = frozenset({"macs", "hca_guids"})

CREATE = """
CREATE TABLE IF NOT EXISTS host_facts (
    hostname       TEXT PRIMARY KEY REFERENCES hosts (hostname),
    pxe_nic        TEXT,
    pxe_mac        TEXT,
    macs           TEXT,
    serial         TEXT,
    service_tag    TEXT,
    model          TEXT,
    redfish_system_id TEXT,
    bios_version   TEXT,
    bmc_firmware   TEXT,
    bmc_mac        TEXT,
    maas_system_id TEXT,
    os_address     TEXT,
    hca_guids      TEXT,
    updated_at     REAL NOT NULL,
    updated_by     TEXT NOT NULL
)
"""


def write_facts(db: sqlite3.Connection, hostname: str, updates: Mapping[str, Any], *, command: str,
                at: float) -> None:
    """Upsert the given facts of one (known) host; raises StateError naming a fact that is not valid."""
    stored = normalise_facts(redact(dict(updates)))
    if not stored:
        return
    names = list(stored)  # checked against FACT_NAMES by normalise_facts: safe to name as columns
    values = [json.dumps(stored[n]) if n in _JSON_FACTS and stored[n] is not None else stored[n] for n in names]
    columns = ", ".join(["hostname", *names, "updated_at", "updated_by"])
    marks = ", ".join("?" * (len(names) + 3))
    assignments = ", ".join(f"{n} = excluded.{n}" for n in [*names, "updated_at", "updated_by"])
    db.execute(
        f"INSERT INTO host_facts ({columns}) VALUES ({marks}) ON CONFLICT (hostname) DO UPDATE SET {assignments}",
        [hostname, *values, at, command],
    )


def _facts(row: sqlite3.Row) -> HostFacts:
    stored = {n: json.loads(row[n]) if n in _JSON_FACTS and row[n] is not None else row[n] for n in FACT_NAMES}
    return HostFacts(**typed(stored), updated_at=row["updated_at"], updated_by=row["updated_by"])


def read_facts(db: sqlite3.Connection, hostname: str) -> HostFacts:
    """The host's facts; empty ones when none were written (the caller knows the host exists)."""
    row = db.execute("SELECT * FROM host_facts WHERE hostname = ?", (hostname,)).fetchone()
    return HostFacts() if row is None else _facts(row)


def read_many(db: sqlite3.Connection, hostnames: Iterable[str] | None) -> dict[str, HostFacts]:
    """Facts by hostname for the given hosts the store knows (all its hosts for None), in one query."""
    query = "SELECT h.hostname AS known, f.* FROM hosts h LEFT JOIN host_facts f ON f.hostname = h.hostname"
    if hostnames is None:
        rows = db.execute(query).fetchall()
    else:
        wanted = json.dumps(list(hostnames))  # one parameter however many hosts (SQLite caps them at 32766)
        rows = db.execute(f"{query} WHERE h.hostname IN (SELECT value FROM json_each(?))", (wanted,)).fetchall()
    return {row["known"]: HostFacts() if row["updated_at"] is None else _facts(row) for row in rows}
