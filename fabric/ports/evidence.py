"""Evidence against a port, gathered from every source, and the UFM event pass that yields most of it.

The event pass streams: it keeps every event's time (for burst detection: `burst_events` or more within
`burst_seconds` is a UFM restart or a mass reboot, not a fabric fault) and only the events whose code
counts and whose time is in the window. Events from after `now` (beyond the allowed clock skew), events
of a burst, and 702s with an operator's reason are set apart with the reason, as are lines that were not
events at all.

`host_restarts` reads from the state store when bringup itself reset or power-cycled each host: the BMC
resets it asked for (intents `reset <ResetType>`, not refused) and the history events whose evidence lists
the resets a step made (`resets`, the PXE step's): link-downs of that host just after are its restart.
Without a store (`fabric ports plan` from captures), `parse_resets` reads the same facts from a file the
operator gives (`--resets`): one reset a line, `<host> <ISO time>` (`#` comments; a time without a zone is
UTC), or a JSON list of `{"host": ..., "time": ...}` (what a BMC's event log or a change calendar says).
"""

from __future__ import annotations

import json
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fabric.parsers.common import norm_guid
from fabric.topology import End
from fabric.ufm.events import Rejected, UfmEvent
from fabric.ufm.portrefs import event_ports
from provision.site.port_policy import PORT_UNHEALTHY, PortPolicy
from provision.state import StateStore, intent_table

_KINDS = frozenset({"event", "counter", "counter_reset", "degraded", "port_down", "disabled"})


@dataclass(frozen=True, slots=True)
class Evidence:
    time: datetime | None
    source: str  # "event.log:123", "perfquery-after.txt", "iblinkinfo"
    kind: str  # event | counter | counter_reset | degraded | port_down | disabled
    at: End
    text: str
    code: int | None = None
    condemns: bool = True  # False: reason to watch the link, not to disable it

    def to_dict(self) -> dict[str, object]:
        return {"time": self.time.isoformat() if self.time else None, "source": self.source, "kind": self.kind,
                "at": {"guid": f"0x{self.at.guid}", "port": self.at.port}, "code": self.code,
                "condemns": self.condemns, "text": self.text}

    @classmethod
    def from_dict(cls, raw: object, where: str) -> Evidence:
        """Read back what `to_dict` wrote (another tool's evidence, e.g. `fabric burnin judge --json`);
        ValueError naming `where` for anything else."""
        try:
            assert isinstance(raw, dict)
            at, kind, text = raw["at"], str(raw["kind"]), str(raw["text"])[:1000]
            assert isinstance(at, dict) and kind in _KINDS
            guid, ok = norm_guid(str(at["guid"]))
            port = int(at["port"])
            assert ok and 0 <= port <= 255
            when = datetime.fromisoformat(raw["time"]) if raw.get("time") else None
            code = int(raw["code"]) if raw.get("code") is not None else None
            return cls(when if when is None or when.tzinfo else when.replace(tzinfo=UTC), str(raw["source"])[:200],
                       kind, End(guid, port), text, code, bool(raw.get("condemns", True)))
        except (AssertionError, KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: not a piece of port evidence (time, source, kind, at: {{guid, port}}, "
                             f"text): {str(raw)[:120]}") from None


@dataclass(frozen=True, slots=True)
class Burst:
    start: datetime
    end: datetime
    events: int

    def describe(self) -> str:
        return f"{self.events} events between {self.start.isoformat()} and {self.end.isoformat()}"


@dataclass(frozen=True)
class EventPass:
    counted: tuple[UfmEvent, ...]  # in the window, code counts, not in a burst, not from the future
    set_apart: tuple[Rejected, ...]
    bursts: tuple[Burst, ...]
    in_bursts: int  # counted-code events of the window dropped as part of a burst
    uncounted_codes: dict[int, int] = field(default_factory=dict)  # neither counted nor ignored: code -> n
    scanned: int = 0


def find_bursts(times: array[float], policy: PortPolicy) -> list[tuple[float, float, int]]:
    """(first, last, count) of every run of events where some `burst_seconds` hold `burst_events` or more."""
    ordered = times if all(times[i] <= times[i + 1] for i in range(len(times) - 1)) else array("d", sorted(times))
    need, span = policy.burst_events, policy.burst_seconds
    runs: list[tuple[float, float, int]] = []
    lo, marked_to = 0, -1
    for hi in range(len(ordered)):
        t = ordered[hi]
        while t - ordered[lo] >= span:
            lo += 1
        if hi - lo + 1 >= need:
            if runs and lo <= marked_to:  # overlaps the run being marked: extend it
                first, _last, count = runs[-1]
                runs[-1] = (first, t, count + hi - marked_to)
            else:
                runs.append((ordered[lo], t, hi - lo + 1))
            marked_to = hi
    return runs


def _in_runs(t: float, starts: list[float], runs: list[tuple[float, float, int]]) -> bool:
    i = bisect_right(starts, t) - 1
    return i >= 0 and runs[i][0] <= t <= runs[i][1]


def scan_events(items: Iterable[UfmEvent | Rejected], policy: PortPolicy, now: datetime,
                since: timedelta) -> EventPass:
    counts, ignore = frozenset(policy.codes), frozenset(policy.ignore)
    start, latest = now - since, now + timedelta(seconds=policy.clock_skew_seconds)
    times: array[float] = array("d")
    kept: list[UfmEvent] = []
    apart: list[Rejected] = []
    uncounted: Counter[int] = Counter()
    seen: set[tuple[object, ...]] = set()
    for item in items:
        if isinstance(item, Rejected):
            apart.append(item)
            continue
        times.append(item.time.timestamp())
        code = item.code
        if code not in counts:
            if code not in ignore:
                uncounted[code] += 1
            continue
        if item.time > latest:
            apart.append(Rejected(item.source, item.line, f"event [{code}] at {item.time.isoformat()} is later than "
                                  f"now ({now.isoformat()}): clock skew between UFM and this host?"))
        elif item.time >= start:
            key = (item.time, code, item.object_path, item.message)  # the same event from two sources
            if key not in seen:
                seen.add(key)
                kept.append(item)
    return _prune(kept, apart, times, policy, uncounted)


def _prune(kept: list[UfmEvent], apart: list[Rejected], times: array[float], policy: PortPolicy,
           uncounted: Counter[int]) -> EventPass:
    runs = find_bursts(times, policy)
    starts = [r[0] for r in runs]
    counted: list[UfmEvent] = []
    in_bursts = 0
    for ev in kept:
        if runs and _in_runs(ev.time.timestamp(), starts, runs):
            in_bursts += 1
        elif ev.code == PORT_UNHEALTHY and (reason := event_ports(ev).reason) in policy.skip_702_reasons:
            apart.append(Rejected(ev.source, ev.line, f"702 unhealthy due to {reason}: an operator's doing, "
                                  "not a fault"))
        else:
            counted.append(ev)
    bursts = tuple(Burst(datetime.fromtimestamp(a, UTC), datetime.fromtimestamp(b, UTC), n)
                   for a, b, n in runs)
    return EventPass(tuple(counted), tuple(apart), bursts, in_bursts, dict(uncounted), len(times))


def host_restarts(store: StateStore, since: datetime) -> dict[str, list[datetime]]:
    """Host -> when bringup reset or power-cycled it, since `since` (oldest first)."""
    out: dict[str, list[datetime]] = {}
    db = store.reader()
    start = since.timestamp()
    rows: list[tuple[str, float]] = []
    if intent_table.exists(db):  # none: nothing was ever asked of a peer
        rows += db.execute("SELECT host, started_at FROM intents WHERE system = 'bmc' AND action LIKE 'reset %' "
                           "AND started_at >= ? AND (outcome IS NULL OR outcome != 'failed')", (start,)).fetchall()
    for host, ts, evidence in db.execute("SELECT host, ts, evidence FROM events WHERE ts >= ? AND evidence LIKE "
                                         "'%\"resets\"%'", (start,)):
        try:
            resets = json.loads(evidence).get("resets") if evidence else None
        except (ValueError, AttributeError):
            resets = None
        if resets:
            rows.append((host, ts))
    for host, ts in rows:
        out.setdefault(str(host), []).append(datetime.fromtimestamp(float(ts), UTC))
    return {h: sorted(set(ts)) for h, ts in out.items()}


_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def _reset_time(text: str) -> datetime:
    when = datetime.fromisoformat(text.strip())
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def parse_resets(text: str, source: str) -> dict[str, list[datetime]]:
    """Host -> when it was reset or power-cycled (oldest first), from a `--resets` file; ValueError naming
    the line (or item) that is not a reset."""
    rows: list[tuple[str, str, str]] = []  # host, time, where
    if text.lstrip()[:1] == "[":
        try:
            items = json.loads(text)
        except ValueError:
            raise ValueError(f"{source}: not JSON") from None
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("host"), str) or \
                    not isinstance(item.get("time"), str):
                raise ValueError(f"{source}[{i}]: expected {{\"host\": ..., \"time\": ...}}")
            rows.append((item["host"], item["time"], f"{source}[{i}]"))
    else:
        for n, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 2:
                raise ValueError(f"{source}:{n}: expected `<host> <ISO time>`")
            rows.append((words[0], words[1], f"{source}:{n}"))
    out: dict[str, list[datetime]] = {}
    for host, when, where in rows:
        if not _HOST.match(host):
            raise ValueError(f"{where}: {host[:60]!r} is not a host name")
        try:
            out.setdefault(host, []).append(_reset_time(when))
        except ValueError:
            raise ValueError(f"{where}: {when[:40]!r} is not an ISO time such as 2026-12-01T19:00:00Z") from None
    return {h: sorted(set(ts)) for h, ts in out.items()}
