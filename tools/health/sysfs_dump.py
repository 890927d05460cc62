"""Parsing of the collectors' JSON-lines dumps (header line, then one JSON object per line)."""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import ParseError


def parse_dump(text: str, kind: str, count_key: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ParseError(f"empty {kind} dump")
    header = re.match(rf"^# {re.escape(kind)} v1 (.*)$", lines[0])
    if not header:
        raise ParseError(f"first line is not a '# {kind} v1' header: {lines[0][:80]!r}")
    fields = dict(item.split("=", 1) for item in header.group(1).split() if "=" in item)
    rows = []
    for line in lines[1:]:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{kind}: line is not JSON: {line[:80]!r}") from exc
        if not isinstance(row, dict):
            raise ParseError(f"{kind}: line is not an object: {line[:80]!r}")
        rows.append(row)
    try:
        announced = int(fields[count_key])
    except (KeyError, ValueError) as exc:
        raise ParseError(f"{kind}: header has no {count_key}=N") from exc
    if announced != len(rows):
        raise ParseError(f"{kind}: header announces {announced} rows, dump holds {len(rows)} (truncated?)")
    return fields, rows


def parse_counted_lines(text: str, kind: str) -> list[str]:
    """A verbatim file under a ``# <kind> v1 lines=N`` header; raises ParseError when lines are missing."""
    lines = text.splitlines()
    header = re.match(rf"^# {re.escape(kind)} v1 lines=(\d+)$", lines[0]) if lines else None
    if header is None:
        raise ParseError(f"no '# {kind} v1 lines=N' header")
    body = lines[1:]
    if len(body) != int(header.group(1)):
        raise ParseError(f"{kind}: header announces {header.group(1)} lines, dump holds {len(body)} (truncated?)")
    return body
