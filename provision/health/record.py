"""Which hosts a health run may act on, and writing its verdicts into the lifecycle.

A host is checked once it is `configured` (or further along), and when it `failed` a health check
before (so a repaired host can recover). Healthy hosts move to `healthy` (a host already past it stays
where it is) and then to golden where the site's policy allows; every other verdict, unknown included,
moves the host to `failed` with the most severe problem as the reason and the agent's report as evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from provision.errors import IllegalTransition
from provision.health.golden_set import promote_golden
from provision.health.verdict import HostHealth, Verdict
from provision.site.model import Site
from provision.state import Change, Outcome, State, StateStore, reached

COMMAND_PREFIX = "health"


def command_name(level: str) -> str:
    return f"{COMMAND_PREFIX} {level}"


@dataclass(frozen=True)
class Recorded:
    moves: tuple[Outcome, ...]
    promoted: tuple[str, ...]
    refused: dict[str, str]  # host → why the store refused its move


def eligibility(store: StateStore, hosts: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """(hosts to check, {host: why it is skipped})."""
    eligible: list[str] = []
    skipped: dict[str, str] = {}
    for name in hosts:
        record = store.get(name)
        if record.state is State.failed:
            history = store.history(name)
            last = history[-1] if history else None
            if last is not None and last.command.startswith(COMMAND_PREFIX):
                eligible.append(name)
            else:
                skipped[name] = f"failed ({record.reason}) outside a health check: repair it first"
        elif reached(record.state, State.configured):
            eligible.append(name)
        else:
            skipped[name] = f"{record.state.value}: not configured yet"
    return eligible, skipped


def _evidence(result: HostHealth, level: str) -> dict[str, Any]:
    if result.verdict is not Verdict.healthy:
        return {"level": level, **result.evidence, "duration_s": round(result.duration_s, 3)}
    report = result.evidence.get("report", {})
    checks = [
        {"check": c.get("check"), "status": c.get("status"), "summary": c.get("summary")}
        for c in report.get("checks", [])
        if isinstance(c, dict)
    ]
    return {"level": level, "verdict": "healthy", "checks": checks, "duration_s": round(result.duration_s, 3)}


def _change(result: HostHealth, level: str) -> Change:
    evidence = _evidence(result, level)
    if result.verdict is Verdict.healthy:
        return Change(result.host, State.healthy, command_name(level), evidence=evidence)
    return Change(result.host, State.failed, command_name(level), reason=result.reason, evidence=evidence)


def record_results(site: Site, store: StateStore, results: Sequence[HostHealth], level: str) -> Recorded:
    changes = [_change(r, level) for r in results]
    refused: dict[str, str] = {}
    try:
        moves = store.transition_many(changes)
    except IllegalTransition:
        # Someone moved a host meanwhile: record the rest one by one, and say which could not be.
        moves = []
        for change in changes:
            try:
                moves.append(store.transition_many([change])[0])
            except IllegalTransition as exc:
                refused[change.host] = str(exc)
    healthy = [r.host for r in results if r.verdict is Verdict.healthy and r.host not in refused]
    promoted = promote_golden(site, store, healthy) if healthy else []
    return Recorded(tuple(moves), tuple(o.host for o in promoted), refused)
