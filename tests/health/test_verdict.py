"""Judging one host's answer: only a consistent, complete report is healthy; everything else says why."""

from __future__ import annotations

import json

import pytest

from provision.health.verdict import Verdict, judge, machine_reason, unreachable
from provision.ssh import RemoteRun
from provision.ssh.errors import SshRefused
from tools.health.agent import Report
from tools.health.outcome import CRITICAL, OK, UNKNOWN, WARN, Outcome, exit_code


def _report(*outcomes: Outcome, host: str = "gpu-01", level: str = "fast") -> tuple[str, int]:
    report = Report(host, level, outcomes, 0.0, 0.1)
    return json.dumps(report.as_dict()), exit_code(outcomes)


def _run(stdout: str, rc: int | None, stderr: str = "", truncated: bool = False) -> RemoteRun:
    return RemoteRun("gpu-01", rc, stdout, stderr, 0.2, truncated)


GOOD = Outcome("gpu_inventory", OK, "2 x NVIDIA H200")
XID = Outcome("kernel_xid", CRITICAL, "Xid 79 on GPU 1: fallen off the bus", remediation="Drain; RMA.", reason="xid_79")
SLOW_PCIE = Outcome("pcie_links", WARN, "GPU 0 at x4", reason="pcie_width_x4")


def test_a_consistent_ok_report_is_healthy() -> None:
    out, rc = _report(GOOD, Outcome("nvswitch", "not_applicable", "no NVSwitch", reason="not_applicable"))
    result = judge(_run(out, rc), expected_host="gpu-01", level="fast")
    assert result.verdict is Verdict.healthy
    assert result.reason is None


@pytest.mark.parametrize(
    ("outcomes", "verdict", "reason"),
    [
        ((GOOD, XID), Verdict.critical, "xid_79"),
        ((GOOD, SLOW_PCIE), Verdict.unhealthy, "pcie_width_x4"),
        ((GOOD, SLOW_PCIE, XID), Verdict.critical, "xid_79"),
        ((GOOD, Outcome("gpu_ecc", UNKNOWN, "nvidia-smi hung", reason="timeout")), Verdict.unknown, "timeout"),
    ],
)
def test_the_most_severe_problem_is_the_reason(outcomes: tuple[Outcome, ...], verdict: Verdict, reason: str) -> None:
    out, rc = _report(*outcomes)
    result = judge(_run(out, rc), expected_host="gpu-01", level="fast")
    assert (result.verdict, result.reason) == (verdict, reason)
    assert result.evidence["report"]["checks"], "the agent's report is kept as evidence"


@pytest.mark.parametrize(
    ("stdout", "rc", "truncated", "reason"),
    [
        ("", 0, False, "agent_no_output"),
        ("   \n", 3, False, "agent_no_output"),
        ("", 127, False, "agent_missing"),
        ('{"agent": "bringup-health", "checks": [{"check"', 0, False, "agent_output_garbled"),
        ("\x1b[31m}]skcehc\ufffd :\ufffd{\x00", 0, False, "agent_output_garbled"),
        ("[1, 2, 3]", 0, False, "agent_output_garbled"),
        ("Traceback (most recent call last):\n  File ...\nKeyError: 'x'\n", 1, False, "agent_output_garbled"),
        ('{"checks": []}', None, False, "agent_killed"),
        ("{}", 0, True, "agent_output_too_large"),
    ],
)
def test_broken_answers_are_unknown_never_healthy(stdout: str, rc: int | None, truncated: bool, reason: str) -> None:
    result = judge(_run(stdout, rc, truncated=truncated), expected_host="gpu-01", level="fast")
    assert result.verdict is Verdict.unknown
    assert result.reason == reason


def test_a_report_that_contradicts_its_exit_status_is_unknown() -> None:
    out, _ = _report(GOOD)
    assert judge(_run(out, 2), expected_host="gpu-01", level="fast").reason == "agent_inconsistent"
    out, _ = _report(GOOD, XID)
    tampered = json.loads(out)
    tampered["verdict"] = "ok"
    result = judge(_run(json.dumps(tampered), 0), expected_host="gpu-01", level="fast")
    assert (result.verdict, result.reason) == (Verdict.unknown, "agent_inconsistent")


def test_an_ok_report_with_no_check_that_ran_is_unknown() -> None:
    out, rc = _report(Outcome("nvswitch", "not_applicable", "no NVSwitch", reason="not_applicable"))
    result = judge(_run(out, rc), expected_host="gpu-01", level="fast")
    assert (result.verdict, result.reason) == (Verdict.unknown, "agent_inconsistent")


def test_a_report_for_another_host_or_level_is_unknown() -> None:
    out, rc = _report(GOOD, host="gpu-02")
    assert judge(_run(out, rc), expected_host="gpu-01", level="fast").reason == "agent_wrong_host"
    out, rc = _report(GOOD, level="long")
    assert judge(_run(out, rc), expected_host="gpu-01", level="fast").reason == "agent_wrong_level"


def test_a_rejected_config_is_unknown_with_the_agents_words() -> None:
    stdout = json.dumps({"verdict": "unknown", "exit_code": 3, "error": "config", "problems": ["gpu.count: required"]})
    result = judge(_run(stdout, 3), expected_host="gpu-01", level="fast")
    assert result.reason == "agent_config_rejected"
    assert "gpu.count" in result.summary


def test_ssh_failures_are_unknown_with_their_reason() -> None:
    result = unreachable("gpu-01", SshRefused("gpu-01", "connection refused"), 0.01)
    assert (result.verdict, result.reason, result.summary) == (Verdict.unknown, "ssh_refused", "connection refused")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("xid_79", "xid_79"), ("PCIe Width x4", "pcie_width_x4"), ("", "health_check_failed"), ("79", "health_check_failed"),
     ("a" * 100, "a" * 64)],
)
def test_reasons_become_what_the_state_store_accepts(raw: str, reason: str) -> None:
    assert machine_reason(raw) == reason


@pytest.mark.parametrize(("error", "reason"), [("agent_error", "agent_error"), ("usage", "agent_usage")])
def test_an_agent_that_reached_no_verdict_is_unknown_with_its_own_reason(error: str, reason: str) -> None:
    stdout = json.dumps({"verdict": "unknown", "exit_code": 3, "error": error, "problems": ["ValueError: boom"]})
    result = judge(_run(stdout, 3), expected_host="gpu-01", level="fast")
    assert (result.verdict, result.reason) == (Verdict.unknown, reason)
    assert "boom" in result.summary
