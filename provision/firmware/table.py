"""The `host_firmware` table: each host's last firmware inventory and BIOS attributes, judged against its baseline.

One row per host (the current values; the history keeps the drift events): what the BMC reported (components,
BIOS), when, and the judgement. Written redacted (a BMC is a peer that may echo anything) in one transaction
per batch of hosts. Standard library and provision.state only: `provision status` and the golden gate read it
without loading the Redfish client.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provision.state.redact import redact
from provision.state.store import StateStore

CREATE = """CREATE TABLE IF NOT EXISTS host_firmware (
    hostname TEXT PRIMARY KEY, read_at REAL NOT NULL, inventory TEXT NOT NULL, judgement TEXT NOT NULL,
    on_baseline INTEGER NOT NULL, command TEXT NOT NULL)"""


@dataclass(frozen=True)
class FirmwareRow:
    hostname: str
    read_at: float
    inventory: Mapping[str, Any]  # read.HostFirmware.as_json()
    judgement: Mapping[str, Any]  # drift.Judgement.as_json()
    on_baseline: bool
    command: str


def write_rows(store: StateStore, rows: Iterable[FirmwareRow]) -> None:
    values = [(r.hostname, r.read_at, json.dumps(redact(dict(r.inventory))), json.dumps(dict(r.judgement)),
               int(r.on_baseline), r.command) for r in rows]
    if not values:
        return
    with store.transaction() as db:
        db.execute(CREATE)
        db.executemany(
            "INSERT INTO host_firmware (hostname, read_at, inventory, judgement, on_baseline, command) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hostname) DO UPDATE SET read_at = excluded.read_at, "
            "inventory = excluded.inventory, judgement = excluded.judgement, on_baseline = excluded.on_baseline, "
            "command = excluded.command", values)


def _exists(db: sqlite3.Connection) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'host_firmware'").fetchone()
    return found is not None


def read_rows(store: StateStore, hostnames: Iterable[str] | None = None) -> dict[str, FirmwareRow]:
    db = store.reader()
    if not _exists(db):
        return {}
    rows = db.execute("SELECT hostname, read_at, inventory, judgement, on_baseline, command FROM host_firmware")
    wanted = None if hostnames is None else set(hostnames)
    return {row[0]: FirmwareRow(row[0], row[1], json.loads(row[2]), json.loads(row[3]), bool(row[4]), row[5])
            for row in rows.fetchall() if wanted is None or row[0] in wanted}


def version_spread(rows: Iterable[FirmwareRow]) -> dict[str, dict[str, int]]:
    """Per component kind, the versions the fleet runs and on how many hosts each (a host whose 8 HCAs run one
    version counts once): what `provision status` shows."""
    spread: dict[str, dict[str, int]] = {}
    for row in rows:
        seen = {(str(c.get("kind", "other")), str(c.get("version") or "?"))
                for c in row.inventory.get("components") or ()}
        for kind, version in seen:
            per = spread.setdefault(kind, {})
            per[version] = per.get(version, 0) + 1
    return {kind: dict(sorted(v.items())) for kind, v in sorted(spread.items())}
