"""Bounded reading of the job's JSONL files (standard library only: the controller's supervisor and
report read them without torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path, max_bytes: int = 1 << 30) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, reading at most `max_bytes`; torn lines (a writer killed
    mid-line) and lines that are not objects are skipped."""
    with open(path, "rb") as f:
        data = f.read(max_bytes)
    rows = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
