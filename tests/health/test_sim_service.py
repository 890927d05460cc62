"""The lab's sshhosts service for the embedded site: its faults file, its exports, its expectations."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provision.health.expectations import ENV_OVERLAY, load_overlay, render_expectations, validate_expectations
from provision.site import load_site
from provision.ssh import ENV_ADDRESS_MAP, ENV_KEY_FILE, ENV_KNOWN_HOSTS
from sim.addresses import BMCS, SERVICES, TEST_HOSTS
from sim.lab import LabContext
from sim.sshhosts import service
from sim.sshhosts.addresses import SSH_HOSTS, ssh_host_address
from sim.sshhosts.faults import FaultsError, load_faults
from tests.health.conftest import needs_replay

SIM_SITE = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"


def test_the_ssh_host_range_overlaps_no_other_part_of_the_lab_plan() -> None:
    for other in (TEST_HOSTS, SERVICES, BMCS):
        assert not SSH_HOSTS.overlaps(other)
    assert ssh_host_address(0) == "127.0.32.1"
    assert ssh_host_address(511) == "127.0.34.4"


def test_the_service_exports_what_the_controller_reads(tmp_path: Path) -> None:
    ctx = LabContext(site=load_site(SIM_SITE), run_dir=tmp_path, secrets={})
    [svc] = service.services(ctx)
    assert set(svc.exports) == {ENV_KEY_FILE, ENV_KNOWN_HOSTS, ENV_ADDRESS_MAP, ENV_OVERLAY}
    assert svc.exports[ENV_KEY_FILE].startswith(str(tmp_path))
    assert not svc.probe(), "not ready before the server says so"


def test_a_site_without_a_faults_file_has_no_simulated_ssh_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(service.ENV_FAULTS_FILE, raising=False)
    doc = yaml.safe_load(SIM_SITE.read_text())
    doc.pop("fabric", None)  # the cabling design stays with the embedded site
    (tmp_path / "site.yml").write_text(yaml.safe_dump(doc))
    ctx = LabContext(site=load_site(tmp_path / "site.yml"), run_dir=tmp_path / "run", secrets={})
    assert service.services(ctx) == []


@needs_replay
def test_the_embedded_sites_faults_file_is_valid() -> None:
    faults = load_faults(SIM_SITE.parent / "health-faults.yml")
    assert faults.fixture_dir("gpu-r1-03").name == "hdr8-xid79"
    assert faults.fixture_dir("gpu-r1-01").name == "hdr8-healthy"
    assert faults.fixture_dir("gpu-r1-01").is_dir()


def test_a_faults_file_naming_a_missing_replay_set_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "faults.yml"
    (tmp_path / "replay" / "healthy").mkdir(parents=True)
    path.write_text(yaml.safe_dump({"fixture_root": "replay", "default_fixture": "healthy",
                                    "hosts": {"h1": {"fixture": "nope"}}}))
    with pytest.raises(FaultsError, match="nope"):
        load_faults(path)
    path.write_text(yaml.safe_dump({"default_fixture": "healthy", "hosts": {"h1": {"endpoint": "sometimes"}}}))
    with pytest.raises(FaultsError, match="endpoint"):
        load_faults(path)


def test_the_replayed_machines_expectations_fit_the_sim_class() -> None:
    site = load_site(SIM_SITE)
    host = site.host("gpu-r1-01")
    assert host is not None
    overlay = load_overlay(site, {ENV_OVERLAY: str(service.REPLAYED_EXPECTATIONS)})
    validate_expectations(render_expectations(site, host, "long", overlay), "sim class")
