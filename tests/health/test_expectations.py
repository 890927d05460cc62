"""The agent's expectations rendered from the site: accepted by the agent's own config loader, faithful to the site."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.health.errors import HealthError
from provision.health.expectations import ib_rate_gbps, render_expectations
from provision.site import load_site
from provision.site.model import IbSpeed
from tools.health.config import parse_config

SIM_SITE = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"
IMBUE_SITE = Path(__file__).resolve().parents[2] / "inventory" / "examples" / "imbue-scale.yml"


@pytest.mark.parametrize("site_file", [SIM_SITE, IMBUE_SITE])
def test_every_host_renders_a_config_the_agent_accepts(site_file: Path) -> None:
    site = load_site(site_file)
    for host in site.hosts()[:40]:
        exp = parse_config(render_expectations(site, host, "fast"))
        assert exp.host == host.hostname
        cls = site.host_class(host)
        assert exp.gpu.count == (cls.gpu.count if cls.gpu else 0)
        assert exp.ib.hca_count == (cls.ib.hca_count if cls.ib else 0)


def test_the_sim_gpu_class_carries_the_site_facts() -> None:
    site = load_site(SIM_SITE)
    host = site.host("gpu-r1-01")
    assert host is not None
    exp = parse_config(render_expectations(site, host, "fast"))
    assert (exp.gpu.count, exp.gpu.model, exp.gpu.driver_version) == (2, "NVIDIA H200", "580.159.04")
    assert exp.gpu.vbios_versions == ("96.00.A5.00.1A",)
    assert (exp.gpu.pcie_gen, exp.gpu.pcie_width) == (5, 16)
    assert (exp.ib.hca_count, exp.ib.rate_gbps, exp.ib.width) == (8, 200.0, "4X")
    assert exp.storage.disk_max_used_pct == 95.0
    assert exp.long is None


def test_ib_rates_match_what_the_kernel_prints() -> None:
    # /sys/class/infiniband/*/ports/*/rate: "200 Gb/sec (4X HDR)", "400 Gb/sec (4X NDR)", "100 Gb/sec (4X EDR)"
    assert ib_rate_gbps(IbSpeed.HDR, "4X") == 200
    assert ib_rate_gbps(IbSpeed.NDR, "4X") == 400
    assert ib_rate_gbps(IbSpeed.EDR, "4X") == 100
    assert ib_rate_gbps(IbSpeed.NDR, "2X") == 200


def test_long_checks_need_every_floor_and_say_which_is_missing() -> None:
    site = load_site(SIM_SITE)
    host = site.host("gpu-r1-01")
    assert host is not None
    with pytest.raises(HealthError, match="membw_gbps"):
        render_expectations(site, host, "long")
