"""The agent's expectations rendered from the site: accepted by the agent's own config loader, faithful to the site."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provision.health.errors import HealthError
from provision.health.expectations import ib_rate_gbps, load_overlay, render_expectations, validate_expectations
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


def test_long_checks_without_a_membw_floor_are_refused_before_any_host_is_touched() -> None:
    site = load_site(SIM_SITE)
    host = site.host("gpu-r1-01")
    assert host is not None
    config = render_expectations(site, host, "long")
    assert config["long"] == {"stress_tflops_floor": 630, "allreduce_busbw_floor_gbps": 340}
    with pytest.raises(HealthError, match="membw_floor_gbps"):
        validate_expectations(config, "host class 'hgx-h200-sim'")


def test_the_overlay_adds_what_the_site_model_has_no_field_for(tmp_path: Path) -> None:
    doc = yaml.safe_load(SIM_SITE.read_text())
    doc.pop("fabric", None)  # the cabling design stays with the embedded site; health does not read it
    (tmp_path / "site.yml").write_text(yaml.safe_dump(doc))
    (tmp_path / "health-expectations.yml").write_text(yaml.safe_dump({"host_classes": {"hgx-h200-sim": {
        "gpu": {"nvlinks_per_gpu": 18},
        "kernel_log": {"expected_patterns": ["^software IO TLB: No low mem$"]},
        "system": {"clock_sync_required": False},
        "long": {"membw_floor_gbps": 3800},
    }}}))
    site = load_site(tmp_path / "site.yml")
    host = site.host("gpu-r1-01")
    assert host is not None
    config = render_expectations(site, host, "long", load_overlay(site, {}))
    validate_expectations(config, "test")
    exp = parse_config(config)
    assert exp.gpu.nvlinks_per_gpu == 18 and exp.gpu.count == 2, "merged, not replaced"
    assert exp.system.clock_sync_required is False
    assert exp.long is not None and (exp.long.membw_floor_gbps, exp.long.stress_tflops_floor) == (3800, 630)


def _site_without_fabric() -> str:
    doc = yaml.safe_load(SIM_SITE.read_text())
    doc.pop("fabric", None)
    return str(yaml.safe_dump(doc))


def test_an_overlay_for_an_unknown_class_or_a_bad_key_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text(_site_without_fabric())
    overlay = tmp_path / "health-expectations.yml"
    overlay.write_text(yaml.safe_dump({"host_classes": {"hgx-b200": {}}}))
    site = load_site(tmp_path / "site.yml")
    with pytest.raises(HealthError, match="not in the site: hgx-b200"):
        load_overlay(site, {})
    overlay.write_text(yaml.safe_dump({"host_classes": {"hgx-h200-sim": {"gpu": {"nvlinkz": 1}}}}))
    host = site.host("gpu-r1-01")
    assert host is not None
    with pytest.raises(HealthError, match="nvlinkz: unknown key"):
        validate_expectations(render_expectations(site, host, "fast", load_overlay(site, {})), "test")
