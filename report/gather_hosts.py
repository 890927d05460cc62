"""The hosts' side of the report, from the state store alone: the lifecycle funnel per rack, every failed
host with its evidence, remediation and history, and the health heat map (the latest health result each
host's history holds). One read of the hosts and one of the events, whatever the site's size."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provision.state import Event, HostRecord, State, StateStore
from provision.state.lifecycle import FLOW, RANK
from provision.state.records import event
from provision.steps.pipeline import remediation_for
from report.model import FailedHost, HealthCell, HealthMatrix, HealthRow, HistoryItem, RackFunnel, StageCount

MAX_EVIDENCE_CHARS = 6000
PASSING = frozenset({"ok", "not_applicable"})
HEALTH_PREFIX = "health"


def stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


def all_events(store: StateStore) -> dict[str, list[Event]]:
    """Every host's events, oldest first, in one query."""
    per: dict[str, list[Event]] = {}
    for row in store.reader().execute("SELECT * FROM events ORDER BY id"):
        item = event(row)
        per.setdefault(item.host, []).append(item)
    return per


def reached_rank(record: HostRecord) -> int:
    """How far along the flow a host got: a failed host got as far as the state it failed in."""
    if record.state is State.failed:
        return RANK[record.resume_from] if record.resume_from is not None else -1
    return RANK[record.state]


def funnel(records: Sequence[HostRecord]) -> tuple[RackFunnel, ...]:
    racks: dict[str, list[HostRecord]] = {}
    for r in records:
        racks.setdefault(r.rack, []).append(r)
    out = []
    for rack, hosts in racks.items():
        ranks = [reached_rank(r) for r in hosts]
        stages = tuple(StageCount(s.value, sum(1 for k in ranks if k >= RANK[s])) for s in FLOW)
        out.append(RackFunnel(rack, len(hosts), stages, sum(1 for r in hosts if r.state is State.failed),
                              sum(1 for r in hosts if r.state is State.golden)))
    return tuple(out)


def _failing_checks(checks: Any) -> list[Mapping[str, Any]]:
    if not isinstance(checks, list):
        return []
    return [c for c in checks if isinstance(c, dict) and c.get("status") not in PASSING]


def evidence_view(evidence: Any) -> str:
    """The stored evidence as indented JSON; a health report keeps only the checks that did not pass."""
    shown = evidence
    if isinstance(evidence, dict) and isinstance(evidence.get("report"), dict):
        report = dict(evidence["report"])
        report["checks"] = _failing_checks(report.get("checks"))
        shown = {**evidence, "report": report}
    text = json.dumps(shown, indent=1, sort_keys=True, default=str) if shown is not None else "(none recorded)"
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[:MAX_EVIDENCE_CHARS] + "\n… (cut)"


def _detail(evidence: Any, reason: str) -> str:
    if isinstance(evidence, dict):
        for key in ("detail", "message"):
            if isinstance(evidence.get(key), str):
                return str(evidence[key])
        report = evidence.get("report")
        failing = _failing_checks(report.get("checks")) if isinstance(report, dict) else []
        if failing:
            return "; ".join(f"{c.get('check')}: {c.get('summary')}" for c in failing[:3])
    return reason


def remediation(evidence: Any, reason: str | None) -> str:
    """The failing health check's own advice when the agent gave one, else the step table's."""
    report = evidence.get("report") if isinstance(evidence, dict) else None
    for check in _failing_checks(report.get("checks") if isinstance(report, dict) else None):
        if check.get("remediation"):
            return str(check["remediation"])
    return remediation_for(reason) or "no remediation is recorded for this reason: read the evidence"


def _history(events: Iterable[Event]) -> tuple[HistoryItem, ...]:
    return tuple(HistoryItem(stamp(e.ts), e.command, e.from_state.value if e.from_state else None, e.to_state.value,
                             e.reason, e.override) for e in events)


def failed_hosts(records: Sequence[HostRecord], events: Mapping[str, list[Event]]) -> tuple[FailedHost, ...]:
    out = []
    for r in records:
        if r.state is not State.failed:
            continue
        reason = r.reason or "failed"
        out.append(FailedHost(r.hostname, r.rack, reason, r.resume_from.value if r.resume_from else None,
                              stamp(r.updated_at), _detail(r.evidence, reason), evidence_view(r.evidence),
                              remediation(r.evidence, r.reason), _history(events.get(r.hostname, ()))))
    return tuple(out)


def _latest_health(events: Sequence[Event]) -> Event | None:
    return next((e for e in reversed(events) if e.command.startswith(HEALTH_PREFIX)
                 and e.to_state in (State.healthy, State.failed)), None)


def _checks_of(evidence: Any) -> tuple[list[dict[str, Any]], str]:
    """(the checks a health result holds, the message of a result without any)."""
    if not isinstance(evidence, dict):
        return [], "no evidence recorded"
    checks = evidence.get("checks")
    if not isinstance(checks, list) and isinstance(evidence.get("report"), dict):
        checks = evidence["report"].get("checks")
    found = [c for c in checks if isinstance(c, dict) and c.get("check")] if isinstance(checks, list) else []
    return found, str(evidence.get("message") or evidence.get("error") or "")


def health_matrix(records: Sequence[HostRecord], events: Mapping[str, list[Event]]) -> HealthMatrix:
    results: dict[str, tuple[HostRecord, Event, list[dict[str, Any]], str]] = {}
    names: dict[str, None] = {}
    for r in records:
        latest = _latest_health(events.get(r.hostname, ()))
        if latest is not None:
            checks, message = _checks_of(latest.evidence)
            results[r.hostname] = (r, latest, checks, message)
            names.update((str(c["check"]), None) for c in checks)
    columns = tuple(names)
    rows = []
    for host, (r, latest, checks, message) in results.items():
        by_name = {str(c["check"]): c for c in checks}
        default = "unknown" if not checks else "untested"
        cells = tuple(HealthCell(name, str(by_name[name].get("status", "unknown")) if name in by_name else default,
                                 str(by_name[name].get("summary", "")) if name in by_name else message)
                      for name in columns)
        evidence: dict[str, Any] = latest.evidence if isinstance(latest.evidence, dict) else {}
        report: dict[str, Any] = evidence["report"] if isinstance(evidence.get("report"), dict) else {}
        verdict = str(evidence.get("verdict") or report.get("verdict")
                      or ("healthy" if latest.to_state is State.healthy else "unhealthy"))
        rows.append(HealthRow(host, r.rack, str(evidence.get("level", "")), verdict, cells, r.state is State.failed))
    missing = tuple(r.hostname for r in records if r.hostname not in results)
    return HealthMatrix(columns, tuple(rows), missing)
