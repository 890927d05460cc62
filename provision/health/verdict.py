"""Judge what came back from a host: the agent's report, its exit status, or an SSH failure. Pure.

Healthy needs everything to agree: exit status 0, a JSON report for the right host and level whose
verdict is ok, at least one check that ran and passed, and no check in any other state. Anything
short of that is "unknown" with the reason (garbled, truncated or empty output, a crashed agent, a
report that contradicts its exit status): unknown never counts as healthy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from provision.ssh import RemoteRun
from provision.ssh.errors import SshError
from provision.state import peer_json


class Verdict(StrEnum):
    healthy = "healthy"
    unhealthy = "unhealthy"  # usable, but not good enough for the golden set
    critical = "critical"  # never allocate
    unknown = "unknown"  # could not tell


# The agent's exit codes and report verdicts (tools/health/outcome.py).
_BY_EXIT = {0: Verdict.healthy, 1: Verdict.unhealthy, 2: Verdict.critical, 3: Verdict.unknown}
_BY_REPORT = {
    "ok": Verdict.healthy,
    "warn": Verdict.unhealthy,
    "critical": Verdict.critical,
    "unknown": Verdict.unknown,
}
_CHECK_RANK = {"critical": 0, "unknown": 1, "warn": 2}
_PASSING = {"ok", "not_applicable"}
_REASON_OK = re.compile(r"[^a-z0-9_]+")
_EVIDENCE_TAIL = 2000


@dataclass(frozen=True)
class Problem:
    check: str
    status: str
    reason: str
    summary: str
    remediation: str = ""


@dataclass(frozen=True)
class HostHealth:
    host: str
    verdict: Verdict
    reason: str | None  # machine-readable, the most severe problem's; None when healthy
    summary: str
    problems: tuple[Problem, ...] = ()
    duration_s: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)


def machine_reason(text: str, fallback: str = "health_check_failed") -> str:
    """A reason the state store accepts (`[a-z][a-z0-9_]{0,63}`), from whatever the agent said."""
    cleaned = _REASON_OK.sub("_", text.strip().lower()).strip("_")
    if not cleaned or not cleaned[0].isalpha():
        return fallback
    return cleaned[:64]


def _tail(text: str) -> str:
    return text if len(text) <= _EVIDENCE_TAIL else "…" + text[-_EVIDENCE_TAIL:]


def unreachable(host: str, error: SshError, duration_s: float) -> HostHealth:
    message = str(error).removeprefix(f"{host}: ")
    return HostHealth(
        host,
        Verdict.unknown,
        error.reason,
        message,
        (Problem("ssh", "unknown", error.reason, message),),
        duration_s,
        {"verdict": "unknown", "error": error.reason, "message": message},
    )


def _unknown(run: RemoteRun, reason: str, summary: str) -> HostHealth:
    evidence = {
        "verdict": "unknown",
        "error": reason,
        "message": summary,
        "exit_status": run.rc,
        "stdout_tail": _tail(run.stdout),
        "stderr_tail": _tail(run.stderr),
    }
    problems = (Problem("agent", "unknown", reason, summary),)
    return HostHealth(run.host, Verdict.unknown, reason, summary, problems, run.duration_s, evidence)


def _problems(checks: list[dict[str, Any]]) -> tuple[Problem, ...]:
    found = [
        Problem(
            check=str(c.get("check", "?")),
            status=str(c.get("status")),
            reason=machine_reason(str(c.get("reason") or c.get("check") or "")),
            summary=str(c.get("summary", "")),
            remediation=str(c.get("remediation", "")),
        )
        for c in checks
        if c.get("status") not in _PASSING
    ]
    return tuple(sorted(found, key=lambda p: _CHECK_RANK.get(p.status, 1)))


def judge(run: RemoteRun, *, expected_host: str, level: str) -> HostHealth:
    """The verdict on one host from the agent's run there."""
    if run.truncated:
        return _unknown(run, "agent_output_too_large", "the agent's output went past the size limit")
    if run.rc is None:
        return _unknown(run, "agent_killed", "the agent died on a signal")
    if not run.stdout.strip():
        what = "not found on the host" if run.rc == 127 else f"no report (exit status {run.rc})"
        reason = "agent_missing" if run.rc == 127 else "agent_no_output"
        return _unknown(run, reason, f"the health agent gave {what}")
    try:
        report = peer_json.loads(run.stdout, what="the agent's report")
    except json.JSONDecodeError as exc:
        return _unknown(run, "agent_output_garbled", f"the agent's report is not JSON ({exc.msg} at {exc.pos})")
    if isinstance(report, dict) and report.get("error") == "config":
        said = "; ".join(str(p) for p in report.get("problems", []))[:300]
        return _unknown(run, "agent_config_rejected", f"the agent rejected its expectations: {said}")
    if isinstance(report, dict) and isinstance(report.get("error"), str) and "checks" not in report:
        # The agent reached no verdict and said why (exit 3): its own reason, not "garbled".
        said = "; ".join(str(p) for p in report.get("problems", []) if p)[:300] or "no detail"
        error = machine_reason(str(report["error"]), "failed")
        reason = error if error.startswith("agent_") else f"agent_{error}"
        return _unknown(run, reason[:64], f"the agent reached no verdict ({report['error']}): {said}")
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        return _unknown(run, "agent_output_garbled", "the agent's report has no list of checks")
    if report.get("host") != expected_host:
        return _unknown(run, "agent_wrong_host", f"the report is for {report.get('host')!r}, not {expected_host!r}")
    if report.get("level") != level:
        return _unknown(run, "agent_wrong_level", f"asked for {level} checks, the report is {report.get('level')!r}")
    checks = [c for c in report["checks"] if isinstance(c, dict)]
    by_report = _BY_REPORT.get(str(report.get("verdict")))
    by_exit = _BY_EXIT.get(run.rc)
    if by_report is None or by_exit is None or by_report is not by_exit:
        return _unknown(
            run,
            "agent_inconsistent",
            f"the report says {report.get('verdict')!r} but the agent exited {run.rc}",
        )
    problems = _problems(checks)
    passed = [c for c in checks if c.get("status") == "ok"]
    if by_report is Verdict.healthy and (problems or not passed):
        why = "a check that did not pass" if problems else "no check that ran"
        return _unknown(run, "agent_inconsistent", f"the report says ok but lists {why}")
    if by_report is not Verdict.healthy and not problems:
        return _unknown(run, "agent_inconsistent", f"the report says {report['verdict']} but names no problem")
    evidence = {"verdict": by_report.value, "exit_status": run.rc, "report": report}
    if run.stderr.strip():
        evidence["stderr_tail"] = _tail(run.stderr)
    if by_report is Verdict.healthy:
        return HostHealth(run.host, Verdict.healthy, None, f"{len(passed)} checks passed", (), run.duration_s, evidence)
    worst = problems[0]
    summary = f"{worst.check}: {worst.summary}" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
    return HostHealth(run.host, by_report, worst.reason, summary, problems, run.duration_s, evidence)
