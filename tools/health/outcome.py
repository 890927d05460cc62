"""What a check concludes, and how many conclusions fold into one verdict and exit code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

OK = "ok"
WARN = "warn"  # unhealthy but usable
CRITICAL = "critical"  # never allocate
UNKNOWN = "unknown"  # could not tell
NOT_APPLICABLE = "not_applicable"

STATUSES = (OK, WARN, CRITICAL, UNKNOWN, NOT_APPLICABLE)

EXIT_CODES = {OK: 0, NOT_APPLICABLE: 0, WARN: 1, CRITICAL: 2, UNKNOWN: 3}

# A host with one unknown check is not known to be usable, so unknown outranks warn; critical outranks all.
_RANK = {NOT_APPLICABLE: 0, OK: 0, WARN: 1, UNKNOWN: 2, CRITICAL: 3}


@dataclass(frozen=True)
class Outcome:
    check: str
    status: str
    summary: str
    remediation: str = ""
    # machine-readable reason for anything but ok, e.g. "xid_79", "pcie_width_x4", "tool_missing"
    reason: str = ""
    evidence: tuple[str, ...] = ()
    metrics: tuple[tuple[str, float], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def as_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "status": self.status,
            "summary": self.summary,
            "reason": self.reason,
            "remediation": self.remediation,
            "evidence": list(self.evidence),
            "metrics": dict(self.metrics),
        }


def worst(statuses: Iterable[str]) -> str:
    result = OK
    for status in statuses:
        if _RANK[status] > _RANK[result]:
            result = status
    return result


def verdict(outcomes: Iterable[Outcome]) -> str:
    """The host's overall status: critical > unknown > warn > ok (not_applicable counts as ok)."""
    folded = worst(o.status for o in outcomes)
    return OK if folded == NOT_APPLICABLE else folded


def exit_code(outcomes: Iterable[Outcome]) -> int:
    return EXIT_CODES[verdict(outcomes)]


def unknown(check: str, summary: str, reason: str, remediation: str = "", evidence: Iterable[str] = ()) -> Outcome:
    return Outcome(check, UNKNOWN, summary, remediation=remediation, reason=reason, evidence=tuple(evidence))


def not_applicable(check: str, summary: str) -> Outcome:
    return Outcome(check, NOT_APPLICABLE, summary, reason="not_applicable")
