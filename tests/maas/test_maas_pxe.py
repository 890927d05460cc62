"""The MAAS simulator PXE-boots a machine only through the switches as built (sim/maas/pxe.py): a boot NIC whose
cable is unplugged or whose port is error-disabled never reaches the rack controller, MAAS's status monitor fails
the commissioning when its status expires, and `provision maas deploy` names the cable from the switch's view.
Stand-ins: the MAAS API simulator (sim/maas, MAAS 3.5's API and status_monitor message) and the switch simulator
(sim/switches: NX-OS / EOS answers from the as-built cabling)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from provision.state import StateStore
from sim.maas.pxe import PxeNetwork
from sim.switches.asbuilt import PXE_VLAN, EthernetFaults, LabHost, build
from sim.switches.harness import running
from tests.maas.conftest import RunningMaas
from tests.maas.test_maas_flow import HOSTS, _deploy, site  # noqa: F401  (the flow tests' site fixture)

PASSWORD = "sw-pxe-Pa55"
TIMED_OUT = "Node operation 'Commissioning' timed out after 20 minutes."


def _cabling(site_file: Path, faults: EthernetFaults) -> tuple[Path, list[str]]:
    """The site's Ethernet design and the switches' as-built for the fixture's hosts (their harvested MACs)."""
    hosts = [LabHost(h, "r1", i + 1, f"b8:ce:f6:00:03:0{i}", f"b8:ce:f6:00:01:0{i}") for i, h in enumerate(HOSTS[:5])]
    design, asbuilt = build(hosts, faults, "switch-admin", "admin", "BRINGUP_SIM_SWITCH_PASSWORD")
    design.pop("switches")  # declared in the site (tor-r1, the switch simulator's address): the cabling only
    (site_file.parent / "ethernet.yml").write_text(yaml.safe_dump(design))
    path = site_file.parent / "asbuilt.json"
    path.write_text(json.dumps(asbuilt))
    return path, [h.pxe_mac for h in hosts]


def test_a_boot_nic_behind_an_unplugged_or_error_disabled_port_never_boots_and_is_named_from_the_switch(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str],  # noqa: F811 (the fixture)
        monkeypatch: pytest.MonkeyPatch) -> None:
    faults = EthernetFaults(crossed=[("gpu-r1-04", "gpu-r1-05")], unplugged=["gpu-r1-02"], err_disabled=["gpu-r1-03"])
    asbuilt, macs = _cabling(site, faults)
    maas.sim.pxe = PxeNetwork(asbuilt, PXE_VLAN, frozenset(macs), boot_timeout_s=0.2)
    monkeypatch.setenv("BRINGUP_SIM_SWITCH_PASSWORD", PASSWORD)
    with running(json.loads(asbuilt.read_text()), PASSWORD):
        code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[1-5]")
    by_host = {r["host"]: r for r in rows}
    assert code == 2
    # crossed cables still land on PXE-VLAN ports: those machines boot and deploy
    assert {h for h, r in by_host.items() if r["state"] == "deployed"} == {"gpu-r1-01", "gpu-r1-04", "gpu-r1-05"}
    assert by_host["gpu-r1-02"]["reason"] == "pxe_cable_unplugged"
    assert by_host["gpu-r1-03"]["reason"] == "pxe_port_err_disabled"
    store = StateStore(site.parent / "state" / "sim.db")
    for host in ("gpu-r1-02", "gpu-r1-03"):
        record = store.get(host)
        assert record.evidence["status_message"] == TIMED_OUT and record.evidence["status_name"] == "Failed commissioning"
        assert record.evidence["power_state"] == "on", "MAAS powered it on; it never PXE-booted"
    assert record.evidence["switch_view"]["status"] == "err_disabled"
    assert "error-disabled" in record.evidence["switch_view"]["reason"]
    assert "Eth1/26" in str(store.get("gpu-r1-02").evidence["switch_view"]["port"])
    store.close()


def test_a_mac_outside_the_labs_ethernet_or_a_lab_without_switches_boots(tmp_path: Path) -> None:
    network = PxeNetwork(tmp_path / "absent.json", PXE_VLAN, frozenset({"b8:ce:f6:00:01:00"}))
    assert network.boots("b8:ce:f6:00:01:00"), "no as-built file: no switch simulator to say otherwise"
    hosts = [LabHost("a", "r1", 1, "02:00:00:00:00:01", "02:00:00:00:01:01")]
    _, asbuilt = build(hosts, EthernetFaults(unplugged=["a"]))
    path = tmp_path / "asbuilt.json"
    path.write_text(json.dumps(asbuilt))
    network = PxeNetwork(path, PXE_VLAN, frozenset({"02:00:00:00:01:01"}))
    assert not network.boots("02:00:00:00:01:01") and network.boots("02:00:00:00:09:09")
