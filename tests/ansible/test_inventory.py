"""The inventory from the site file and the state store: groups, host variables, plugin, exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from provision.ansible_inventory import CONFIGURABLE_GROUP, build_inventory, load_inventory, to_ini, to_yaml
from provision.site import load_site
from provision.state import State, StateStore

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SITE = """
name: mini
ssh: {user: ops, port: 2222, key_file: keys/id, address_overrides: {gpu-a-01: 10.1.0.11}}
credentials:
  bmc: {username: root, password: {env: MINI_BMC_PASSWORD}}
host_classes:
  hgx:
    gpu: {model: NVIDIA H100 80GB HBM3, count: 8}
    ib: {hca_count: 8, link_speed: NDR}
    nvme_data_disks: 8
    nvswitch: true
    versions: {gpu_driver: 570.172.08, ofed: 24.10-1.1.4}
  ctl: {}
racks:
  - name: a
    hosts:
      - {hostname: gpu-a-01, u: 2, role: gpu, class: hgx, bmc: {address: 10.0.0.11, credential: bmc}}
      - {hostname: gpu-a-02, u: 6, role: gpu, class: hgx, bmc: {address: 10.0.0.12, credential: bmc}}
  - name: b-2
    hosts:
      - {hostname: gpu-b-01, u: 2, role: gpu, class: hgx, bmc: {address: 10.0.0.21, credential: bmc}}
      - {hostname: ctl-b-01, u: 40, role: controller, class: ctl, bmc: {address: 10.0.0.29, credential: bmc}}
"""


@pytest.fixture
def site_with_states(tmp_path: Path) -> tuple[Path, Path]:
    site = tmp_path / "mini.yml"
    site.write_text(SITE)
    db = tmp_path / "mini.db"
    loaded = load_site(site)
    with StateStore(db) as store:
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        store.mark("gpu-a-01", State.deployed, reason="test", command="test")
        store.mark("gpu-a-02", State.golden, reason="test", command="test")
        store.mark("gpu-b-01", State.deployed, reason="test", command="test")
        store.fail("gpu-b-01", "site_install_the_driver", command="site.yml")
    return site, db


def test_groups_per_rack_role_class_and_state(site_with_states: tuple[Path, Path]) -> None:
    inv = load_inventory(*site_with_states)
    assert inv.groups["rack_a"] == ("gpu-a-01", "gpu-a-02")
    assert inv.groups["rack_b_2"] == ("ctl-b-01", "gpu-b-01")
    assert inv.groups["role_gpu"] == ("gpu-a-01", "gpu-a-02", "gpu-b-01")
    assert inv.groups["role_controller"] == ("ctl-b-01",)
    assert inv.groups["class_hgx"] == ("gpu-a-01", "gpu-a-02", "gpu-b-01")
    assert inv.groups["state_deployed"] == ("gpu-a-01",)
    assert inv.groups["state_golden"] == ("gpu-a-02",)
    assert inv.groups["state_failed"] == ("gpu-b-01",)
    assert inv.groups["state_declared"] == ("ctl-b-01",)
    assert inv.groups["state_configured"] == ()
    # deployed or later, and a host that failed after being deployed (a site.yml failure) may be retried
    assert inv.groups[CONFIGURABLE_GROUP] == ("gpu-a-01", "gpu-a-02", "gpu-b-01")


def test_host_variables_reach_the_host_and_describe_its_hardware(site_with_states: tuple[Path, Path]) -> None:
    site, db = site_with_states
    inv = load_inventory(site, db)
    a1 = inv.hostvars["gpu-a-01"]
    assert a1["ansible_host"] == "10.1.0.11" and inv.hostvars["gpu-a-02"]["ansible_host"] == "gpu-a-02"
    assert a1["ansible_user"] == "ops" and a1["ansible_port"] == 2222
    assert a1["ansible_ssh_private_key_file"] == str((site.parent / "keys/id").resolve())
    assert "StrictHostKeyChecking=accept-new" in a1["ansible_ssh_common_args"]
    assert a1["bringup_bmc"] == {"address": "10.0.0.11", "port": 443}
    assert a1["bringup_hardware"]["gpu"] == {"model": "NVIDIA H100 80GB HBM3", "count": 8}
    assert a1["bringup_hardware"]["nvswitch"] is True and a1["bringup_hardware"]["nvme_data_disks"] == 8
    assert a1["bringup_versions"] == {"gpu_driver": "570.172.08", "gpu_driver_source": "cuda", "ofed": "24.10-1.1.4"}
    assert inv.hostvars["gpu-b-01"]["bringup_state"] == "failed"
    assert inv.hostvars["gpu-b-01"]["bringup_state_reason"] == "site_install_the_driver"
    assert "password" not in json.dumps(inv.as_list())
    assert inv.all_vars["bringup_state_db"] == str(db.resolve())
    assert inv.all_vars["bringup_ntp_servers"] == []  # no ntp in the site: the common role uses pool.ntp.org


def test_the_sites_ntp_servers_reach_the_inventory(tmp_path: Path) -> None:
    site = tmp_path / "ntp.yml"
    site.write_text(SITE + "ntp: {servers: [10.0.0.2, ntp1.mgmt.example.net]}\n")
    inv = load_inventory(site)
    assert inv.all_vars["bringup_ntp_servers"] == ["10.0.0.2", "ntp1.mgmt.example.net"]


def test_the_sites_health_overlay_reaches_the_hosts_of_its_class(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_HEALTH_EXPECTATIONS", raising=False)
    site = tmp_path / "mini.yml"
    site.write_text(SITE)
    (tmp_path / "health-expectations.yml").write_text("host_classes: {hgx: {long: {membw_floor_gbps: 3800}}}\n")
    inv = load_inventory(site)
    assert inv.hostvars["gpu-a-01"]["bringup_health_overlay"] == {"long": {"membw_floor_gbps": 3800}}
    assert inv.hostvars["ctl-b-01"]["bringup_health_overlay"] == {}


def test_a_host_unknown_to_the_store_is_declared(tmp_path: Path) -> None:
    site = tmp_path / "mini.yml"
    site.write_text(SITE)
    inv = build_inventory(load_site(site), {})
    assert inv.groups["state_declared"] == ("ctl-b-01", "gpu-a-01", "gpu-a-02", "gpu-b-01")
    assert inv.groups[CONFIGURABLE_GROUP] == ()


def test_an_address_override_with_a_port_sets_the_host_and_its_ssh_port(tmp_path: Path) -> None:
    site = tmp_path / "mini.yml"
    site.write_text(SITE.replace("{gpu-a-01: 10.1.0.11}", "{gpu-a-01: 10.1.0.11, gpu-a-02: '10.1.0.12:2200', "
                                                          "gpu-b-01: '[fd00::21]:2201'}"))
    hostvars = build_inventory(load_site(site), {}).hostvars
    got = {h: (hostvars[h]["ansible_host"], hostvars[h]["ansible_port"]) for h in ("gpu-a-01", "gpu-a-02", "gpu-b-01")}
    assert got == {"gpu-a-01": ("10.1.0.11", 2222), "gpu-a-02": ("10.1.0.12", 2200), "gpu-b-01": ("fd00::21", 2201)}


def _plain(value: object) -> object:
    """ansible-inventory tags strings an inventory plugin set as unsafe (not to be templated): unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _ansible_inventory(source: Path) -> dict[str, object]:
    done = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(source), "--list"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    listed: dict[str, object] = dict(_plain(json.loads(done.stdout)))  # type: ignore[call-overload]
    return listed


@pytest.mark.tools("ansible-inventory")
def test_ansible_inventory_lists_the_plugin_and_both_exports_alike(site_with_states: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    site, db = site_with_states
    config = tmp_path / "mini.bringup_state.yml"
    config.write_text(f"plugin: bringup_state\nsite: {site.name}\ndb: {db.name}\n")
    inv = load_inventory(site, db)
    (tmp_path / "hosts.ini").write_text(to_ini(inv))
    (tmp_path / "hosts.yml").write_text(to_yaml(inv))
    assert yaml.safe_load(to_yaml(inv))["all"]["children"]["state_golden"]["hosts"] == {"gpu-a-02": None}
    listings = [_ansible_inventory(tmp_path / name) for name in ("mini.bringup_state.yml", "hosts.ini", "hosts.yml")]
    for listing in listings:
        assert sorted(listing["configurable"]["hosts"]) == ["gpu-a-01", "gpu-a-02", "gpu-b-01"]  # type: ignore[index]
        hostvars = listing["_meta"]["hostvars"]  # type: ignore[index]
        assert hostvars["gpu-a-01"]["ansible_host"] == "10.1.0.11"
        assert hostvars["gpu-a-01"]["bringup_hardware"]["ib"]["link_speed"] == "NDR"
        assert hostvars["gpu-b-01"]["bringup_state"] == "failed"


def test_cli_list_follows_the_script_inventory_protocol(site_with_states: tuple[Path, Path]) -> None:
    site, db = site_with_states
    done = subprocess.run([sys.executable, "-m", "provision.ansible_inventory", "--list", "--site", str(site),
                           "--db", str(db)], capture_output=True, text=True, check=True, cwd=REPO)
    doc = json.loads(done.stdout)
    assert doc["role_gpu"]["hosts"] == ["gpu-a-01", "gpu-a-02", "gpu-b-01"]
    assert doc["_meta"]["hostvars"]["ctl-b-01"]["bringup_role"] == "controller"


def test_cli_reads_the_state_db_variable_unless_given_db(site_with_states: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.ansible_inventory.__main__ import main
    from tests.cli_run import run_cli

    site, db = site_with_states
    monkeypatch.setenv("BRINGUP_STATE_DB", str(db))
    runs = [run_cli(main, ["--list", "--site", str(site), *extra]) for extra in ([], ["--db", str(tmp_path / "other.db")])]
    assert [r.code for r in runs] == [0, 0], [r.stderr for r in runs]
    listed = [json.loads(r.stdout) for r in runs]
    assert listed[0]["state_golden"]["hosts"] == ["gpu-a-02"]
    assert listed[0]["all"]["vars"]["bringup_state_db"] == str(db.resolve())
    assert listed[1]["state_golden"]["hosts"] == [] and (tmp_path / "other.db").is_file()
    assert not (tmp_path / "state" / "mini.db").exists(), "the default database beside the site was not used"


@pytest.mark.tools("ansible-inventory")
def test_the_plugin_reads_the_state_db_variable_when_its_config_names_no_db(
        site_with_states: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, db = site_with_states
    config = tmp_path / "mini.bringup_state.yml"
    config.write_text(f"plugin: bringup_state\nsite: {site.name}\n")
    monkeypatch.setenv("BRINGUP_STATE_DB", str(db))
    listing = _ansible_inventory(config)
    assert listing["state_golden"]["hosts"] == ["gpu-a-02"]  # type: ignore[index]
    assert listing["_meta"]["hostvars"]["gpu-a-01"]["bringup_state_db"] == str(db.resolve())  # type: ignore[index]
    assert not (tmp_path / "state" / "mini.db").exists(), "the default database beside the site was not used"


@pytest.mark.parametrize(("servers", "pools"), [([], ["pool.ntp.org"]), (["10.0.0.2"], [])])
def test_the_common_role_uses_the_sites_ntp_servers_else_the_public_pool(
        tmp_path: Path, servers: list[str], pools: list[str]) -> None:
    import os

    playbook = tmp_path / "ntp.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "vars": {"bringup_ntp_servers": servers},
        "tasks": [{"ansible.builtin.include_vars": str(REPO / "roles" / "common" / "defaults" / "main.yml")},
                  {"ansible.builtin.debug": {"msg": "{{ {'servers': common_chrony_servers, "
                                                    "'pools': common_chrony_pools} | to_json }}"}}]}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json",
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STRATEGY": "linear", "ANSIBLE_LOCALHOST_WARNING": "0"}
    done = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    msg = json.loads(done.stdout)["plays"][0]["tasks"][1]["hosts"]["localhost"]["msg"]
    assert json.loads(msg) == {"servers": servers, "pools": pools}
