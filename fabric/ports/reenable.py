"""Re-enabling a repaired link: enable both ends, prove it trains at its design rate with no errors, or
put it back out of service with the new evidence.

The proof: every end this actuator reaches comes up `LinkUp` within `train_s`, at the width and speed
the design gives the link, and its error counters (perfquery) do not move between two reads `window_s`
apart. A link that fails any of it is disabled again (`reenable_refused`, with what was seen); one that
passes is `reenabled`, and its hosts may earn golden again through health (and burn-in). A `reenabling` row
(the intent) is written before the first port is enabled, so a run killed before its verdict is recorded
is reconciled by the next acting command (reconcile.py: the link is disabled again, the repair unproven).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from fabric.errors import FabricError
from fabric.ports.actuate import Actuator, PortStatus
from fabric.ports.apply import disable_ends
from fabric.ports.ledger import (
    APPLY_FAILED,
    DISABLED,
    JOB_TIMEOUT,
    PLANNED,
    REENABLE_REFUSED,
    REENABLED,
    REENABLING,
    Ledger,
    LedgerEnd,
    LedgerEntry,
    LedgerError,
)
from fabric.topology import End

COMMAND = "fabric ports reenable"
ERROR_COUNTERS = ("symbol_errors", "link_downed", "rcv_errors", "link_error_recovery",
                  "local_link_integrity_errors", "rcv_remote_physical_errors")
Counters = Callable[[End], Awaitable[Mapping[str, int]]]


@dataclass(frozen=True)
class ReenableResult:
    entry: LedgerEntry
    ok: bool
    findings: tuple[str, ...]


async def _trained(actuator: Actuator, ends: list[LedgerEnd], train_s: float) -> dict[End, PortStatus]:
    deadline = time.monotonic() + train_s
    seen: dict[End, PortStatus] = {}
    while True:
        for e in ends:
            at = End(e.guid, e.port)
            seen[at] = await actuator.status(at)
        if all(s.trained for s in seen.values()) or time.monotonic() >= deadline:
            return seen
        await asyncio.sleep(0.2)


def _rate_findings(seen: Mapping[End, PortStatus], expected: str | None) -> list[str]:
    out = [f"{s.describe()}: did not train (expected LinkUp)" for s in seen.values() if not s.trained]
    if expected and " " in expected:
        width, speed = expected.split(" ", 1)
        out += [f"{s.describe()}: trained at {s.width} {s.speed}, design {expected}" for s in seen.values()
                if s.trained and (s.width != width or s.speed != speed)]
    return out


async def _error_findings(counters: Counters, ends: list[LedgerEnd], window_s: float) -> list[str]:
    points = [End(e.guid, e.port) for e in ends]
    before = [await counters(p) for p in points]
    await asyncio.sleep(window_s)
    after = [await counters(p) for p in points]
    out = []
    for p, b, a in zip(points, before, after, strict=True):
        for name in ERROR_COUNTERS:
            if a.get(name, 0) != b.get(name, 0):
                out.append(f"0x{p.guid}[{p.port}]: {name} {b.get(name, 0)} -> {a.get(name, 0)} in {window_s:g} s")
    return out


async def reenable(entry: LedgerEntry, actuator: Actuator, ledger: Ledger, counters: Counters, *, actor: str,
                   window_s: float = 30.0, train_s: float = 15.0) -> ReenableResult:
    if entry.state not in {DISABLED, APPLY_FAILED, JOB_TIMEOUT, PLANNED, REENABLE_REFUSED}:
        raise LedgerError(f"{entry.link} is {entry.state}: nothing to re-enable")
    reach = [e for e in sorted(entry.ends, key=lambda e: not e.is_switch)
             if actuator.reaches(End(e.guid, e.port), e.is_switch)]
    if not reach:
        raise LedgerError(f"{entry.link}: {actuator.via} reaches neither end of this link")
    findings: list[str] = []
    jobs: dict[End, str | None] = {}
    ledger.record(replace(entry, id=None, at=time.time(), actor=actor, command=COMMAND, state=REENABLING,
                          detail=f"re-enabling after the repair (was {entry.state}, row {entry.id})"))
    try:
        for e in reach:  # each enable done (its UFM job completed) before the next end and the checks
            at = End(e.guid, e.port)
            if (await actuator.status(at)).disabled:
                jobs[at] = await actuator.set_enabled(at, True)
        seen = await _trained(actuator, reach, train_s)
        findings = _rate_findings(seen, entry.extra.get("expected"))
        if not findings:
            findings = await _error_findings(counters, reach, window_s)
    except FabricError as e:
        findings.append(f"re-enable check failed: {e}")
    ok = not findings
    done: tuple[LedgerEnd, ...] = tuple(replace(e, done="enabled", job=jobs.get(End(e.guid, e.port)))
                                        for e in entry.ends)
    if not ok:
        ends, error = await disable_ends(actuator, entry.ends)
        done = tuple(ends)
        if error:
            findings.append(f"could not disable it again: {error}")
    evidence = tuple({"time": None, "source": COMMAND, "kind": "reenable_check", "text": f, "code": None,
                      "condemns": True} for f in findings)
    row = replace(entry, id=None, at=time.time(), actor=actor, command=COMMAND,
                  state=REENABLED if ok else REENABLE_REFUSED, ends=done,
                  why="repaired: trained at its design rate with no errors" if ok else entry.why,
                  evidence=entry.evidence + evidence,
                  detail=f"window {window_s:g} s; " + ("; ".join(findings) if findings else "no errors"))
    return ReenableResult(ledger.record(row), ok, tuple(findings))
