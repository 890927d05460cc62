"""The agent run live on the lent 2x H200 machine through `provision health` over SSH
(`bench/health_live.py`, 2026-11-30, captures in tests/fixtures/h200/live-ssh-2026-11-30*.json: the first
with the site's NCCL_MIN_NCHANNELS at 32, the second at 64 after bench/allreduce_env_bench.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from provision.health.expectations import load_overlay, render_expectations
from provision.health.verdict import Verdict, judge
from provision.site import load_site
from provision.ssh import RemoteRun
from tools.health.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
LIVE_SITE = ROOT / "inventory" / "h200-live" / "site.yml"
CAPTURE = ROOT / "tests" / "fixtures" / "h200" / "live-ssh-2026-11-30.json"
CAPTURE_64 = ROOT / "tests" / "fixtures" / "h200" / "live-ssh-2026-11-30-nchannels64.json"


def _reports(capture: Path = CAPTURE) -> dict[str, dict[str, Any]]:
    runs = json.loads(capture.read_text())
    events = json.loads(runs["history"]["stdout"])
    return {e["evidence"]["level"]: e["evidence"]["report"] for e in events if (e.get("evidence") or {}).get("report")}


@pytest.fixture(autouse=True)
def _bmc_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_LIVE_BMC_PASSWORD", "unused")


@pytest.mark.parametrize("level", ["fast", "long"])
def test_the_live_site_renders_expectations_the_agent_accepts(level: str) -> None:
    site = load_site(LIVE_SITE)
    host = site.hosts()[0]
    exp = parse_config(render_expectations(site, host, level, load_overlay(site)))
    assert (exp.gpu.count, exp.gpu.model, exp.ib.hca_count) == (2, "NVIDIA H200", 0)


def test_the_live_long_run_is_judged_unhealthy_for_the_machines_real_warnings_only() -> None:
    report = _reports()["long"]
    run = RemoteRun("h200-live-01", report["exit_code"], json.dumps(report), "", report["duration_s"])
    health = judge(run, expected_host="h200-live-01", level="all")
    assert health.verdict is Verdict.unhealthy
    warned = {p.check: p.reason for p in health.problems if p.status == "warn"}
    assert warned == {"kernel_log_unexpected": "unexpected_kernel_log", "clock_sync": "clock_unsynchronised",
                      "nccl_allreduce": "allreduce_busbw_low"}
    checks = {c["check"]: c for c in report["checks"]}
    for name in ("gpu_inventory", "gpu_ecc", "gpu_remapped_rows", "gpu_versions", "nvlink_state", "pcie_links",
                 "gpu_stress", "gpu_memory_bandwidth"):
        assert checks[name]["status"] == "ok", name
    for absent in ("ib_ports", "fabric_manager", "docker_gpus", "zpool"):
        assert checks[absent]["status"] == "not_applicable", absent
    metrics = checks["gpu_stress"]["metrics"]
    assert min(metrics["stress_tflops_gpu0"], metrics["stress_tflops_gpu1"]) >= 630


def test_the_fbhub_lines_the_live_run_flagged_are_now_in_the_sites_expected_list() -> None:
    report = _reports()["fast"]
    flagged = next(c for c in report["checks"] if c["check"] == "kernel_log_unexpected")["evidence"]
    site = load_site(LIVE_SITE)
    patterns = [re.compile(p) for p in load_overlay(site)["h200x2"]["kernel_log"]["expected_patterns"]]
    lines = [line.split(": ", 1)[1] for line in flagged]
    assert lines and all(any(p.search(line) for p in patterns) for line in lines)


def test_with_64_nccl_channels_the_live_all_reduce_clears_its_floor_and_only_the_clock_warns() -> None:
    report = _reports(CAPTURE_64)["long"]
    run = RemoteRun("h200-live-01", report["exit_code"], json.dumps(report), "", report["duration_s"])
    health = judge(run, expected_host="h200-live-01", level="all")
    assert {p.check: p.reason for p in health.problems} == {"clock_sync": "clock_unsynchronised"}
    checks = {c["check"]: c for c in report["checks"]}
    busbw = {k: v for k, v in checks["nccl_allreduce"]["metrics"].items() if k.startswith("allreduce_busbw")}
    assert len(busbw) == 3 and min(busbw.values()) >= 340
    site = load_site(LIVE_SITE)
    assert load_overlay(site)["h200x2"]["long"]["env"] == {"NCCL_MIN_NCHANNELS": "64"}


@pytest.mark.parametrize("level", ["fast", "long"])
def test_the_revised_agent_live_warns_only_about_the_clock(level: str) -> None:
    # Run again after the review fixes (PCIe generation judged along the path to the root port, Xids
    # from the journal first, zpool -p, collectors under their timeout): nothing new fires on real H200s.
    capture = ROOT / "tests" / "fixtures" / "h200" / f"live-ssh-2026-11-30-revised-{level}.json"
    report = _reports(capture)[level]
    run = RemoteRun("h200-live-01", report["exit_code"], json.dumps(report), "", report["duration_s"])
    health = judge(run, expected_host="h200-live-01", level="fast" if level == "fast" else "all")
    assert {p.check: p.reason for p in health.problems} == {"clock_sync": "clock_unsynchronised"}
    checks = {c["check"]: c["status"] for c in report["checks"]}
    assert checks["pcie_links"] == checks["gpu_xid"] == checks["nvlink_state"] == "ok"
    if level == "long":
        assert checks["gpu_stress"] == checks["nccl_allreduce"] == "ok"
