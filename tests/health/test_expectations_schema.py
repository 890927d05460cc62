"""One expectations schema: the controller (from the Site model) and the health_agent role (its filter plugin over
the inventory's host vars) render the same agent config for every host class, and the agent parses both."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.ansible_inventory.build import build_inventory
from provision.health import agent_expectations
from provision.health.agent_expectations import FactsError
from provision.health.expectations import render_expectations
from provision.site import Site, load_site
from provision.site.model import Host
from tools.health import config as agent_config
from tools.health.config import parse_config

REPO = Path(__file__).resolve().parents[2]
SITES = [REPO / "inventory" / "sim" / "site.yml", REPO / "inventory" / "examples" / "imbue-scale.yml"]
FILTER_FILE = REPO / "roles" / "health_agent" / "filter_plugins" / "health_expectations.py"
TEMPLATE_EVAL = Path(__file__).with_name("health_template_eval.py")
ROLE_DEFAULTS_FOR_TEMPLATE = {"health_agent_level": "fast", "health_agent_overlay": {}, "health_agent_zpool": "",
                              "common_cpu_governor": "performance"}

RoleFilter = Callable[..., dict[str, Any]]


def _role_filter() -> RoleFilter:
    """The filter as Ansible loads it: the plugin file's FilterModule (the file is not a package module)."""
    spec = importlib.util.spec_from_file_location("health_agent_filter_plugin", FILTER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: RoleFilter = module.FilterModule().filters()["bringup_health_expectations"]
    return found


def _one_host_per_class(site: Site) -> list[Host]:
    first: dict[str, Host] = {}
    for host in site.hosts():
        first.setdefault(host.host_class, host)
    return list(first.values())


def _cases() -> list[tuple[Path, str]]:
    return [(path, host.hostname) for path in SITES for host in _one_host_per_class(load_site(path))]


@pytest.fixture(scope="module")
def sites() -> dict[Path, tuple[Site, dict[str, Any]]]:
    """Per site file: the site and the host vars the Ansible inventory exports for it."""
    out = {}
    for path in SITES:
        site = load_site(path)
        out[path] = (site, {h: dict(v) for h, v in build_inventory(site, {}).hostvars.items()})
    return out


@pytest.mark.parametrize("level", ["fast", "long"])
@pytest.mark.parametrize(("site_file", "hostname"), _cases(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_the_controller_and_the_role_render_the_same_expectations_for_every_host_class(
    sites: dict[Path, tuple[Site, dict[str, Any]]], site_file: Path, hostname: str, level: str
) -> None:
    site, hostvars = sites[site_file]
    host = site.host(hostname)
    assert host is not None
    from_site = render_expectations(site, host, level)
    from_inventory = _role_filter()(hostvars[hostname], hostname, level=level)
    assert from_site == from_inventory
    assert from_site["host"] == hostname and "gpu" in from_site and "ib" in from_site


@pytest.mark.parametrize(("site_file", "hostname"), _cases(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_the_agent_parses_what_both_render(
    sites: dict[Path, tuple[Site, dict[str, Any]]], site_file: Path, hostname: str
) -> None:
    site, hostvars = sites[site_file]
    host = site.host(hostname)
    assert host is not None
    cls = site.host_class(host)
    for config in (render_expectations(site, host, "fast"), _role_filter()(hostvars[hostname], hostname)):
        exp = parse_config(config)
        assert exp.gpu.count == (cls.gpu.count if cls.gpu else 0)
        assert exp.ib.hca_count == (cls.ib.hca_count if cls.ib else 0)
        assert exp.storage.disk_max_used_pct == cls.floors.disk_usage_max_pct
    if cls.floors.matmul_tflops is not None and cls.floors.allreduce_busbw_gbps is not None:
        # The memory-bandwidth floor has no site-model field: both sides take it from an overlay.
        overlay = {"long": {"membw_floor_gbps": 3000.0}}
        long_site = render_expectations(site, host, "long", {host.host_class: overlay})
        long_role = _role_filter()(hostvars[hostname], hostname, level="long", overlay=overlay)
        assert long_site == long_role
        parsed = parse_config(long_role).long
        assert parsed is not None and parsed.stress_tflops_floor == cls.floors.matmul_tflops


@pytest.mark.parametrize(("host_var", "renamed", "named"), [
    ("bringup_hardware", ("gpu", "gpus"), "hardware.gpu"),
    ("bringup_hardware", ("nvswitch", "nv_switch"), "hardware.nvswitch"),
    ("bringup_floors", ("disk_usage_max_pct", "disk_max_pct"), "floors.disk_usage_max_pct"),
])
def test_a_key_renamed_in_the_host_vars_fails_with_the_key_it_lacks(
    sites: dict[Path, tuple[Site, dict[str, Any]]], host_var: str, renamed: tuple[str, str], named: str
) -> None:
    _site, hostvars = sites[SITES[0]]
    host_vars = copy.deepcopy(hostvars["gpu-r1-01"])
    old, new = renamed
    host_vars[host_var][new] = host_vars[host_var].pop(old)
    with pytest.raises(FactsError, match=rf"gpu-r1-01: {named}: missing"):
        _role_filter()(host_vars, "gpu-r1-01")


def test_host_vars_outside_the_bringup_inventory_are_named() -> None:
    with pytest.raises(FactsError, match="bringup_versions, bringup_floors are missing"):
        _role_filter()({"bringup_hardware": {}}, "gpu-x")


def test_the_renderer_writes_the_schema_version_the_agent_reads() -> None:
    assert agent_expectations.SCHEMA_VERSION == agent_config.SCHEMA_VERSION


def test_an_unknown_level_is_refused() -> None:
    site = load_site(SITES[0])
    host = site.host("gpu-r1-01")
    assert host is not None
    with pytest.raises(FactsError, match="level 'medium'"):
        render_expectations(site, host, "medium")


def _template(variable_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, str(TEMPLATE_EVAL)], input=json.dumps(variable_sets), capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads(text) for text in json.loads(done.stdout)]


def test_the_role_template_is_the_rendered_expectations_plus_what_the_other_roles_configure(
    sites: dict[Path, tuple[Site, dict[str, Any]]],
) -> None:
    site, hostvars = sites[SITES[0]]
    names = [h.hostname for h in _one_host_per_class(site)]
    cases = [{**hostvars[n], **ROLE_DEFAULTS_FOR_TEMPLATE, "inventory_hostname": n, "hostvars": {n: hostvars[n]}}
             for n in names]
    cases[0]["health_agent_zpool"] = "tank"
    cases[0]["health_agent_overlay"] = {"gpu": {"nvlinks_per_gpu": 18}}
    for name, case, written in zip(names, cases, _template(cases), strict=True):
        host = site.host(name)
        assert host is not None
        cls = site.host_class(host)
        expected = render_expectations(site, host, "fast")
        configured = {"peermem_required": bool(cls.ib and cls.ib.hca_count > 0)}
        expected["gpu"] = {**expected["gpu"], **configured, **case["health_agent_overlay"].get("gpu", {})}
        expected["system"] = {"swap_allowed": False, "cpu_governor": "performance"}
        expected["storage"] = {**expected["storage"], "zpools": ["tank"] if case["health_agent_zpool"] else []}
        assert written == expected
        parse_config(written)
