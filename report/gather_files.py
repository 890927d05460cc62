"""What other tools leave in the run directory, read tolerantly and bounded: the stored `fabric validate
--json` result, `provision ethernet check --json`'s result, and the training job's per-step JSONL. A file
that is absent says "not run"; one that cannot be read says why; neither is ever made up."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.site.bounded import InputRefused, read_bytes
from provision.state import peer_json
from report.model import Ethernet, Point, Restart, Table, Training
from training.jsonl import read_jsonl

VALIDATION_FILE = "fabric-validate.json"
ETHERNET_FILE = "ethernet-check.json"
TRAINING_FILES = ("metrics.jsonl", "metrics_rank0.jsonl")  # the job's file (training/joblog.py), rank 0's own
SUPERVISOR_FILE = "supervisor.jsonl"  # beside it: the supervisor's attempts and restarts (training/supervisor.py)
MAX_RESTARTS = 200
MAX_JSON_BYTES = 32 << 20
MAX_JSONL_BYTES = 64 << 20
MAX_TABLE_ROWS = 2000
MAX_POINTS = 4000
MAX_SEARCH_DEPTH = 3


def read_json(path: Path) -> tuple[Any, str]:
    """(the document or None, where it came from / why there is none)."""
    if not path.exists():
        return None, f"no {path.name} in {path.parent}"
    try:
        return peer_json.loads(read_bytes(path, limit=MAX_JSON_BYTES, what=path.name), what=path.name), str(path)
    except (InputRefused, OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path}: unreadable: {exc}"


def validation(run_dir: Path) -> tuple[Mapping[str, Any] | None, str]:
    doc, source = read_json(run_dir / VALIDATION_FILE)
    if doc is None:
        return None, f"fabric validate not run: {source}"
    if not isinstance(doc, dict):
        return None, f"fabric validate result unusable: {source}: not a JSON object"
    return doc, f"fabric validate --json: {source}"


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _table(title: str, items: list[Any]) -> Table:
    rows = [i for i in items if isinstance(i, dict)][:MAX_TABLE_ROWS]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update((str(k), None) for k in row)
    return Table(title, tuple(columns), tuple(tuple(_cell(row.get(c, "")) for c in columns) for row in rows))


def ethernet(run_dir: Path) -> Ethernet:
    """`provision ethernet check --json` as it is: its top-level values as facts, its lists of objects (and
    those one level down) as tables, whatever their names."""
    doc, source = read_json(run_dir / ETHERNET_FILE)
    if not isinstance(doc, dict):
        return Ethernet(False, source if doc is None else f"{source}: not a JSON object", (), ())
    facts: list[tuple[str, str]] = []
    tables: list[Table] = []
    for key, value in doc.items():
        if isinstance(value, list) and any(isinstance(v, dict) for v in value):
            tables.append(_table(str(key), value))
        elif isinstance(value, dict) and any(isinstance(v, list) for v in value.values()):
            for sub, items in value.items():
                if isinstance(items, list) and any(isinstance(v, dict) for v in items):
                    tables.append(_table(f"{key}: {sub}", items))
                else:
                    facts.append((f"{key}.{sub}", _cell(items)))
        else:
            facts.append((str(key), _cell(value)))
    return Ethernet(True, source, tuple(facts), tuple(tables))


def find_training_log(run_dir: Path) -> Path | None:
    """The newest job JSONL under the run directory (a few levels down: runs keep their own folders)."""
    found: list[Path] = []
    frontier = [run_dir]
    for _ in range(MAX_SEARCH_DEPTH + 1):
        nxt: list[Path] = []
        for folder in frontier:
            found += [folder / name for name in TRAINING_FILES if (folder / name).is_file()]
            try:
                nxt += [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
            except OSError:
                continue
        frontier = nxt
    jobs = [p for p in found if p.name == TRAINING_FILES[0]] or found
    return max(jobs, key=lambda p: p.stat().st_mtime) if jobs else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _thin(points: list[Point]) -> tuple[Point, ...]:
    step = max(1, -(-len(points) // MAX_POINTS))
    return tuple(points[::step]) if step > 1 else tuple(points)


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise OSError(f"not a regular file: {path}")
    return read_jsonl(path, MAX_JSONL_BYTES)  # a job's log only grows: its first MAX_JSONL_BYTES are shown


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), _cell(v)) for k, v in value.items()) if isinstance(value, dict) else ()


def restarts(job_dir: Path) -> tuple[tuple[Restart, ...], str]:
    """The restarts the job's supervisor recorded beside its JSONL, and where they came from (or why none)."""
    path = job_dir / SUPERVISOR_FILE
    if not path.exists():
        return (), f"no {SUPERVISOR_FILE} in {job_dir}: not run under the supervisor"
    try:
        rows = _rows(path)
    except (InputRefused, OSError) as exc:
        return (), f"{path}: unreadable: {exc}"
    out: list[Restart] = []
    for row in rows:
        if row.get("event") != "restart" or len(out) >= MAX_RESTARTS:
            continue
        step, added = row.get("resume_step"), row.get("added")
        cause = " ".join(str(row[k]) for k in ("cause", "kind") if row.get(k))
        out.append(Restart(int(row["attempt"]) if isinstance(row.get("attempt"), int) else 0, cause,
                           _pairs(row.get("failed")), _pairs(row.get("dropped")),
                           tuple(str(h) for h in added) if isinstance(added, list) else (),
                           str(row.get("checkpoint") or ""), step if isinstance(step, int) else None))
    return tuple(out), str(path)


def training(run_dir: Path, log: Path | None = None) -> Training:
    """Loss and MFU per step (rank 0's row where the job file holds every rank's), and the job's events."""
    path = log or find_training_log(run_dir)
    if path is None:
        return Training(False, f"no {' or '.join(TRAINING_FILES)} under {run_dir}", 0, (), (), ())
    try:
        rows = _rows(path)
    except (InputRefused, OSError) as exc:
        return Training(False, f"{path}: unreadable: {exc}", 0, (), (), ())
    loss: dict[int, float] = {}
    mfu: dict[int, float] = {}
    events: list[tuple[str, str]] = []
    for row in rows:
        kind = str(row.get("event", ""))
        step = row.get("step")
        if kind == "step" and isinstance(step, int) and row.get("rank", 0) in (0, None):
            if (value := _number(row.get("loss"))) is not None:
                loss[step] = value
            if (ratio := _number(row.get("mfu"))) is not None:
                mfu[step] = ratio
        elif kind and kind != "step":
            said = {k: v for k, v in row.items() if k not in ("event", "time", "rank", "world", "schema")}
            events.append((kind, _cell(said)[:300]))
    if not loss:
        return Training(False, f"{path}: no training steps recorded", 0, (), (), tuple(events[:50]))
    return Training(True, str(path), len(loss), _thin([Point(s, v) for s, v in sorted(loss.items())]),
                    _thin([Point(s, v) for s, v in sorted(mfu.items())]), tuple(events[:50]), *restarts(path.parent))
