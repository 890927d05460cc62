"""UFM events: `event.log` lines (native and syslog-forwarded) and `GET /ufmRest/app/events` JSON.

event.log line (UFM Enterprise, the form Imbue's parser reads):

    2016-10-17 15:56:33.245 [5744] [112] WARNING [Hardware] IBPort [default(34) / Switch: leaf01 / NA / 16]
        [dev_id: 248a0703006d40f0]: Link-Downed counter delta threshold exceeded. ... Peer info: Computer: h1 HCA-1 / 1.

The syslog-forwarded form puts `Oct 17 15:56:33 host eventlog[pid]: WARNING - ` in front; a line that a
document wrapped (continuation lines indented) is joined back. The REST answer is a JSON list of event
objects; UFM 6.24 names the event code `event_type` (and `type` is the object type), older UFM names
the code `type`. Timestamps carry no zone: they are the UFM server's local time, given as `tz`.

Nothing is dropped silently: a line that is not an event (truncated, garbled, no timestamp) comes back
as a `Rejected` with its line number and the reason. Which ports an event names is read on demand
(`event_ports`), so a day of events is cheap to scan for the few codes that count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any, NamedTuple

from fabric.errors import ParseError
from fabric.parsers.common import printable
from provision.state.peer_json import JsonTooDeep, loads

_LINE = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[(?P<entry>\d+)\] \[(?P<code>\d+)\] (?P<level>\w+) "
    r"\[(?P<category>[^\]]*)\] (?P<otype>\w+) \[(?P<path>[^\]]*)\](?: \[dev_id: (?P<dev>\w+)\])?: ?(?P<msg>.*)$"
)
_SYSLOG = re.compile(r"^[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \S+ eventlog\[\d+\]: \w+ - ")
_BODY_ONLY = re.compile(r"^\[\d+\] \[\d+\] \w+ \[")
_STARTS_EVENT = re.compile(r"^(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d |\d{4}-\d\d-\d\d |\[\d+\] \[\d+\] )")
_PORT_NAME = re.compile(r"([0-9a-fA-F]{16})_(\d+)")


class UfmEvent(NamedTuple):
    """One UFM event. A NamedTuple (immutable, built in C): a day's log holds a million of them."""

    time: datetime
    code: int
    level: str
    category: str
    object_type: str  # IBPort, Link, Switch, Computer, Grid, Site ...
    object_path: str  # "default(34) / Switch: leaf01 / NA / 16", "Source <guid>_<p>  TO Dest: <guid>_<p>"
    dev_id: str | None
    message: str
    entry_id: int | None
    source: str
    line: int | None

    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass(frozen=True, slots=True)
class Rejected:
    """Input that was read but could not be used, with why (never dropped silently)."""

    source: str
    line: int | None
    reason: str
    text: str = ""

    def describe(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        shown = f": {printable(self.text)}" if self.text else ""
        return f"{where}: {self.reason}{shown}"


@dataclass(frozen=True)
class EventLog:
    events: tuple[UfmEvent, ...]
    rejected: tuple[Rejected, ...]


def _time(raw: str, tz: tzinfo) -> datetime:
    return datetime.fromisoformat(raw).replace(tzinfo=tz)


def _logical_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(first line number, text) with indented continuation lines joined to the event line before."""
    held: tuple[int, str] | None = None
    for no, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if line[:1] in (" ", "\t"):
            line = line.strip()
            if line and held is not None and not _STARTS_EVENT.match(line) and not held[1].startswith("#"):
                held = (held[0], held[1].rstrip() + " " + line)
                continue
        if held is not None:
            yield held
        held = (no, line)
    if held is not None:
        yield held


def iter_event_log(lines: Iterable[str], source: str = "event.log",
                   tz: tzinfo = UTC) -> Iterator[UfmEvent | Rejected]:
    """Events and rejected lines of a UFM event.log (or its syslog form), in file order; streams."""
    match = _LINE.match
    for no, line in _logical_lines(lines):
        if not line.strip():
            continue
        body = line
        if line[0].isalpha():
            m_sys = _SYSLOG.match(line)
            if m_sys is None:
                yield Rejected(source, no, "not a UFM event line", line)
                continue
            body = line[m_sys.end():]
        m = match(body)
        if m is None:
            reason = ("an event body without its timestamp (no time: cannot be placed in the window)"
                      if _BODY_ONLY.match(body.lstrip()) else "not a UFM event line (truncated or garbled)")
            yield Rejected(source, no, reason, line)
            continue
        try:
            when = _time(m["ts"], tz)
        except ValueError:
            yield Rejected(source, no, f"impossible timestamp {m['ts']!r}", line)
            continue
        yield UfmEvent(when, int(m["code"]), m["level"], m["category"], m["otype"], m["path"], m["dev"],
                       m["msg"], int(m["entry"]), source, no)


def parse_event_log(text: str, source: str = "event.log", tz: tzinfo = UTC) -> EventLog:
    events: list[UfmEvent] = []
    rejected: list[Rejected] = []
    for item in iter_event_log(text.splitlines(), source, tz):
        (events if isinstance(item, UfmEvent) else rejected).append(item)  # type: ignore[arg-type]
    return EventLog(tuple(events), tuple(rejected))


def parse_rest_events(text: str, source: str = "ufm events", tz: tzinfo = UTC) -> EventLog:
    """`GET /ufmRest/app/events`: the legacy schema (`type` is the code) and 6.24's (`event_type`)."""
    try:
        data = loads(text, what=source)
    except JsonTooDeep as e:
        raise ParseError(source, None, f"{e.msg}, refused: expected the answer of GET /ufmRest/app/events") from None
    except json.JSONDecodeError as e:
        raise ParseError(source, e.lineno, f"not JSON ({e.msg} at column {e.colno}): expected the answer "
                         "of GET /ufmRest/app/events") from None
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        data = data["events"]
    if not isinstance(data, list):
        raise ParseError(source, None, "expected a JSON list of UFM event objects (GET /ufmRest/app/events)")
    events: list[UfmEvent] = []
    rejected: list[Rejected] = []
    for i, item in enumerate(data):
        got = _rest_event(item, i, source, tz)
        (events if isinstance(got, UfmEvent) else rejected).append(got)  # type: ignore[arg-type]
    return EventLog(tuple(events), tuple(rejected))


def _rest_event(item: Any, i: int, source: str, tz: tzinfo) -> UfmEvent | Rejected:
    where = f"{source}[{i}]"
    if not isinstance(item, dict):
        return Rejected(where, None, f"expected an event object, got {type(item).__name__}")
    code_raw = item.get("event_type", item.get("type"))
    try:
        code = int(str(code_raw))
    except ValueError:
        return Rejected(where, None, f"no numeric event code (event_type/type is {code_raw!r})")
    raw_time = item.get("timestamp")
    try:
        when = _time(str(raw_time), tz)
    except ValueError:
        return Rejected(where, None, f"no usable timestamp ({raw_time!r})")
    object_type = str(item.get("type", "")) if "event_type" in item else str(item.get("object_type", ""))
    name, path = str(item.get("object_name", "")), str(item.get("object_path", ""))
    port_name = _PORT_NAME.fullmatch(name)
    dev = port_name.group(1) if port_name else None
    if port_name and name not in path:
        path = f"{path} [{name}]"  # keep the port UFM names the event for (`<guid>_<port>`)
    entry = item.get("id")
    return UfmEvent(when, code, str(item.get("severity", "")), str(item.get("category", "")), object_type,
                    path, dev, str(item.get("description", "")), entry if isinstance(entry, int) else None,
                    where, None)
