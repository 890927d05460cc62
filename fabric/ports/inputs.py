"""What the `fabric ports` commands read from their options and files: durations, times, time zones, UFM
event files (event.log, its syslog form, or REST JSON) and burn-in judgements, each refused with a
`PortsInputError` naming the option."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fabric.captures import read_capture
from fabric.errors import FabricError
from fabric.ports.evidence import Evidence, parse_resets
from fabric.ufm.events import Rejected, UfmEvent, iter_event_log, parse_rest_events

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PortsInputError(FabricError):
    """An option or input file of `fabric ports` that cannot be used."""


def parse_duration(text: str) -> timedelta:
    m = _DURATION.match(text.strip())
    if m is None:
        raise PortsInputError(f"--since {text!r}: expected a duration such as 24h, 90m, 2d or 3600s")
    return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])


def parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise PortsInputError(f"--now {text!r}: expected an ISO time such as 2026-12-01T19:00:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PortsInputError(f"--events-tz {name!r}: not a time zone name (e.g. UTC, America/Los_Angeles)") from None


def read_events(paths: list[Path], tz: tzinfo) -> Iterator[UfmEvent | Rejected]:
    for path in paths:
        text = read_capture(path, "--events")
        if text.lstrip()[:1] in ("[", "{"):
            log = parse_rest_events(text, str(path), tz)
            yield from log.rejected
            yield from log.events
        else:  # read as a file is: universal newlines
            yield from iter_event_log(io.StringIO(text, newline=None), str(path), tz)


def burnin_evidence(paths: list[Path]) -> list[Evidence]:
    """The port-plan evidence of burn-in judgements (their `port_plan_evidence`)."""
    out: list[Evidence] = []
    for path in paths:
        try:
            doc = json.loads(read_capture(path, "--burnin"))
            items = doc["port_plan_evidence"] if isinstance(doc, dict) else None
            if not isinstance(items, list):
                raise ValueError("no port_plan_evidence list: expected `fabric burnin judge --json` output")
            out.extend(Evidence.from_dict(item, f"{path}: port_plan_evidence[{i}]") for i, item in enumerate(items))
        except ValueError as e:
            raise PortsInputError(f"--burnin {path}: {e}") from None
    return out


def read_resets(paths: list[Path]) -> dict[str, list[datetime]]:
    """Host -> when it was reset or power-cycled, from `--resets` files (`fabric.ports.evidence.parse_resets`)."""
    out: dict[str, list[datetime]] = {}
    for path in paths:
        try:
            for host, times in parse_resets(read_capture(path, "--resets"), str(path)).items():
                out[host] = sorted({*out.get(host, []), *times})
        except ValueError as e:
            raise PortsInputError(f"--resets {e}") from None
    return out
