"""The run's summary: hosts grouped by verdict, the most common reasons, and the unhealthy hosts. Pure."""

from __future__ import annotations

from collections import Counter
from typing import Any

from provision.health.run import HealthReport
from provision.health.verdict import Verdict


def summarize(report: HealthReport, *, top: int = 5) -> dict[str, Any]:
    by_verdict: dict[str, list[str]] = {v.value: [] for v in Verdict}
    reasons: dict[str, Counter[str]] = {v.value: Counter() for v in Verdict}
    for result in report.results:
        by_verdict[result.verdict.value].append(result.host)
        if result.reason:
            reasons[result.verdict.value][result.reason] += 1
    skipped_why = Counter(why.split(":")[0] for why in report.skipped.values())
    recorded = report.recorded
    return {
        "site": report.site,
        "level": report.level,
        "checked": len(report.results),
        "duration_s": round(report.duration_s, 2),
        "by_verdict": {verdict: len(hosts) for verdict, hosts in by_verdict.items()},
        "top_reasons": {
            verdict: [[reason, count] for reason, count in counter.most_common(top)]
            for verdict, counter in reasons.items()
            if counter
        },
        "hosts": [
            {
                "host": r.host,
                "verdict": r.verdict.value,
                "reason": r.reason,
                "summary": r.summary,
                "duration_s": round(r.duration_s, 2),
                "problems": [
                    {"check": p.check, "status": p.status, "reason": p.reason, "summary": p.summary,
                     "remediation": p.remediation}
                    for p in r.problems
                ],
            }
            for r in sorted(report.results, key=lambda r: r.host)
        ],
        "skipped": dict(sorted(report.skipped.items())),
        "skipped_by_state": dict(skipped_why),
        "recorded": recorded is not None,
        "promoted_to_golden": list(recorded.promoted) if recorded else [],
        "not_recorded": dict(recorded.refused) if recorded else {},
    }
