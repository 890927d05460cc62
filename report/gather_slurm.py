"""The report's Slurm section: where each host stands in Slurm as the last `provision slurm sync` recorded it
(the store's `slurm_nodes` table and the hosts' `slurm sync` events), and the training job Slurm ran
(`slurm-job.json` in the run directory, written by the job's launcher under Slurm). Absent = not run."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from provision.state import StateStore
from report.gather_files import read_json
from report.model import Slurm, Table

JOB_FILE = "slurm-job.json"
MAX_ROWS = 2000


def _nodes(store: StateStore) -> tuple[Table | None, int]:
    db = store.reader()
    try:
        rows = db.execute(
            "SELECT s.host, h.state, h.reason, s.standing, s.node_state, s.reason, s.updated_at FROM slurm_nodes s "
            "JOIN hosts h ON h.hostname = s.host ORDER BY s.standing = 'available', s.host LIMIT ?",
            (MAX_ROWS,)).fetchall()
        events = int(db.execute("SELECT count(*) FROM events WHERE command = 'slurm sync'").fetchone()[0])
    except sqlite3.OperationalError:  # no sync ever ran against this store
        return None, 0
    table = Table("Nodes as the last sync left them", ("host", "bringup", "in Slurm", "Slurm state", "reason", "since"),
                  tuple((r[0], r[1] + (f" ({r[2]})" if r[2] else ""), r[3], r[4] or "-", r[5] or "",
                         time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r[6]))) for r in rows))
    return table, events


def _job(run_dir: Path) -> tuple[tuple[tuple[str, str], ...], str]:
    doc, source = read_json(run_dir / JOB_FILE)
    if not isinstance(doc, dict):
        return (), source
    return tuple((str(k), str(v)[:500]) for k, v in doc.items() if not isinstance(v, dict | list)), source


def slurm_section(store: StateStore, run_dir: Path) -> Slurm:
    nodes, events = _nodes(store)
    job, job_source = _job(run_dir)
    counts: dict[str, int] = {}
    for row in nodes.rows if nodes else ():
        counts[row[2]] = counts.get(row[2], 0) + 1
    return Slurm(ran=nodes is not None, nodes=nodes, standings=tuple(sorted(counts.items())), events=events,
                 job=job, job_source=job_source)
