"""Management switches declared in the site file (provision/site/switches.py), validated when the site loads,
and the Ethernet design that names them (ethernet.yml keeps the per-host cabling)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from provision.errors import SiteError
from provision.ethernet.design import EthernetDesignError, parse_design
from provision.site import load_site
from tests.sites import copy_sim_site

NICS = "nics:\n  gpu-r1-01:\n    pxe: {switch: tor-r1, port: Eth1/25}\n"


def _site(tmp_path: Path, switches: Mapping[str, object]) -> Path:
    site = copy_sim_site(tmp_path / "site")
    data = yaml.safe_load(site.read_text())
    data["switches"] = dict(switches)
    site.write_text(yaml.safe_dump(data))
    return site


def test_the_sites_switches_are_the_designs_and_the_embedded_site_declares_its_own(tmp_path: Path) -> None:
    site = load_site(_site(tmp_path, {"tor-r1": {"platform": "dell_os10", "address": "tor-r1.mgmt.example",
                                                 "credential": "switch-admin", "location": "r1", "ports": 52}}))
    design = parse_design(NICS, "ethernet.yml", site_switches=site.spec.switches)
    assert design.switches["tor-r1"].platform == "dell_os10" and design.switches["tor-r1"].ports == 52
    embedded = load_site(Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml")
    assert sorted(embedded.spec.switches) == ["tor-r1", "tor-r2"]


def test_a_switch_with_an_unknown_credential_a_shared_address_or_platform_is_refused_at_load(tmp_path: Path) -> None:
    bad = {"tor-r1": {"platform": "cisco_nxos", "address": "10.0.0.1", "credential": "nobody"},
           "tor-r2": {"platform": "cisco_nxos", "address": "10.0.0.1", "credential": "switch-admin"},
           "tor-r3": {"platform": "junos", "address": "10.0.0.3", "credential": "switch-admin"}}
    with pytest.raises(SiteError) as e:
        load_site(_site(tmp_path, bad))
    assert "switches.tor-r3.platform" in str(e.value)
    del bad["tor-r3"]
    with pytest.raises(SiteError) as e:
        load_site(_site(tmp_path / "2", bad))
    text = str(e.value)
    assert "switches.tor-r1.credential: unknown credential 'nobody'" in text
    assert "switches.tor-r2.address: 10.0.0.1:22 is shared with another switch" in text


def test_a_switch_declared_both_in_the_site_and_the_design_is_refused(tmp_path: Path) -> None:
    site = load_site(_site(tmp_path, {"tor-r1": {"platform": "sonic", "address": "10.0.0.1",
                                                 "credential": "switch-admin"}}))
    both = "switches:\n  tor-r1: {platform: sonic, address: 10.0.0.9, credential: switch-admin}\n" + NICS
    with pytest.raises(EthernetDesignError, match="tor-r1 declared both in the site and here"):
        parse_design(both, "ethernet.yml", site_switches=site.spec.switches)
    assert parse_design(both, "ethernet.yml").switches["tor-r1"].address == "10.0.0.9"  # a design on its own
