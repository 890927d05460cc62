"""The embedded site's replayed hosts give the verdicts its faults file promises, with the site's own expectations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provision.health.expectations import load_overlay, render_expectations, validate_expectations
from provision.site import load_site
from sim.sshhosts.faults import load_faults
from sim.sshhosts.service import REPLAYED_EXPECTATIONS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("host", "exit_code", "reason"),
    [
        ("gpu-r1-01", 0, None),
        ("gpu-r1-03", 2, "xid_79"),
        ("gpu-r1-06", 2, "pcie_width_x4"),
        ("gpu-r2-02", 2, "ecc_uncorrected"),
        ("gpu-r2-05", 2, "ib_port_down"),
    ],
)
def test_replayed_host_verdicts(host: str, exit_code: int, reason: str | None, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_HEALTH_EXPECTATIONS", str(REPLAYED_EXPECTATIONS))
    site = load_site(REPO / "inventory" / "sim")
    spec = site.host(host)
    assert spec is not None
    config = render_expectations(site, spec, "fast", load_overlay(site))
    validate_expectations(config, host)
    (tmp_path / "exp.json").write_text(json.dumps(config))
    replay = load_faults(REPO / "inventory" / "sim" / "health-faults.yml").fixture_dir(host)
    out = subprocess.run(
        [sys.executable, "-m", "tools.health", "--config", str(tmp_path / "exp.json"), "--level", "fast",
         "--json", "--replay", str(replay)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    report = json.loads(out.stdout)
    assert out.returncode == exit_code, report
    not_ok = {c["reason"] for c in report["checks"] if c["status"] not in ("ok", "not_applicable")}
    if reason is None:
        assert not_ok == set()
    else:  # the fault's own lines are also kernel-log lines nobody expects
        assert reason in not_ok and not_ok <= {reason, "unexpected_kernel_log"}
