"""The GPU stress floor is a sustained rate the host class states, and a GPU is also judged against its peers.

Issue 16: an H200 at its 700 W limit sustains 654-666 TFLOP/s on normal-distributed bf16 (794-812 only in a
short burst), so the embedded site's floor of 750 (95 % of the burst: 754) could never pass on healthy hardware.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.health.expectations import render_expectations
from provision.site import load_site
from tools.health import long_checks
from tools.health.config import Expectations, parse_config
from tools.health.outcome import OK, WARN

REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "tests" / "fixtures" / "tools" / "replay"
HEALTHY_H200 = REPLAY / "h200x2-healthy" / "long-stress.out"  # 60 s on the lent 2x H200, 665 TFLOP/s sustained
SITES = [REPO / "inventory" / "sim" / "site.yml", REPO / "inventory" / "examples" / "imbue-scale.yml",
         REPO / "inventory" / "h200-live" / "site.yml"]
LOWEST_HEALTHY_SUSTAINED = 654.0  # H200 at 700 W, normal-distributed bf16 8192^3 (docs/performance.md, reports)


def _site_config(site_file: Path, hostname: str | None = None) -> Expectations:
    site = load_site(site_file)
    host = site.host(hostname) if hostname else next(h for h in site.hosts() if site.host_class(h).gpu)
    assert host is not None
    return parse_config(render_expectations(site, host, "long", {host.host_class: {"long": {"membw_floor_gbps": 1}}}))


def test_a_healthy_h200_passes_the_embedded_sites_sustained_floor() -> None:
    exp = _site_config(SITES[0], "gpu-r1-01")
    outcome = long_checks.parse_stress(HEALTHY_H200.read_text(encoding="utf-8"), 0, exp)
    assert outcome.status == OK, outcome.summary
    assert "sustained" in outcome.summary


@pytest.mark.parametrize("site_file", SITES, ids=lambda p: p.parent.name)
def test_every_h100_and_h200_class_states_a_floor_healthy_hardware_sustains(site_file: Path) -> None:
    site = load_site(site_file)
    classes = [c for c in site.spec.host_classes.values()
               if c.gpu and ("H200" in c.gpu.model or "H100" in c.gpu.model)]
    assert classes
    for cls in classes:
        assert cls.floors.matmul_tflops is not None
        assert cls.floors.matmul_tflops <= LOWEST_HEALTHY_SUSTAINED, cls.description


def _stress(edit: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(HEALTHY_H200.read_text(encoding="utf-8"))
    edit(data)
    return json.dumps(data) + "\n"


def _exp(floor: float) -> Expectations:
    data = json.loads((REPLAY / "expectations-h200x2.json").read_text(encoding="utf-8"))
    data["long"]["stress_tflops_floor"] = floor
    return parse_config(data)


def test_the_sustained_rate_is_judged_not_the_opening_burst() -> None:
    def burst_then_sag(d: dict[str, Any]) -> None:
        # 12 s at 800 then 48 s at 600: the whole-run average (640) is above 630, the settled rate is not.
        for g in d["gpus"]:
            g["timeline_tflops"] = [800.0, 800.0, 600.0, 600.0, 600.0, 600.0, 600.0, 600.0, 600.0, 600.0, 600.0]
            g["elapsed_s"] = 60.0
            g["matmuls"] = round(640e12 * 60.0 / (2 * 8192**3))

    outcome = long_checks.parse_stress(_stress(burst_then_sag), 0, _exp(630))
    assert (outcome.status, outcome.reason) == (WARN, "stress_tflops_low"), outcome.summary
    assert "sustained" in outcome.summary


def test_a_gpu_more_than_5_percent_below_its_peers_is_flagged_above_the_floor() -> None:
    def slow_gpu1(d: dict[str, Any]) -> None:
        g = d["gpus"][1]
        g["matmuls"] = round(g["matmuls"] * 0.93)
        g["timeline_tflops"] = [round(w * 0.93, 1) for w in g["timeline_tflops"]]

    outcome = long_checks.parse_stress(_stress(slow_gpu1), 0, _exp(500))  # both far above the floor
    assert (outcome.status, outcome.reason) == (WARN, "stress_tflops_straggler"), outcome.summary
    assert any(e.startswith("GPU 1:") and "peers' median" in e for e in outcome.evidence)

    def slightly_slow(d: dict[str, Any]) -> None:
        d["gpus"][1]["timeline_tflops"] = [round(w * 0.97, 1) for w in d["gpus"][1]["timeline_tflops"]]

    assert long_checks.parse_stress(_stress(slightly_slow), 0, _exp(500)).status == OK  # 3 %: within tolerance
