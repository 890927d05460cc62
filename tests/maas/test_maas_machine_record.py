"""The client reads MAAS's full machine record (79 fields in MAAS 3.5): a real capture, the simulator's record,
interfaces that share a MAC, and records a broken or hostile region could send, cut at fixed bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provision.maas.errors import MaasError
from provision.maas.machine import MAX_INTERFACES, MAX_TEXT, MaasStatus, parse_machine
from sim.maas.machines import Machine, NodeStatus
from sim.maas.representation import machine_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "maas"


def test_a_real_deployed_machine_record_parses() -> None:
    """tests/fixtures/maas/machine-deployed.ystia-yorc.json: a real MAAS answer (Apache-2.0)."""
    machine = parse_machine(json.loads((FIXTURES / "machine-deployed.ystia-yorc.json").read_text()))
    assert (machine.system_id, machine.status, machine.status_name) == ("tdgqkw", MaasStatus.DEPLOYED, "Deployed")
    assert machine.ip_addresses == ("172.20.0.114",) and machine.distro_series == "focal"
    assert machine.boot_mac == "cb:d5:c9:f7:78:04" and machine.power_state == "on"


def test_the_simulator_s_full_record_parses_with_the_boot_interface_first() -> None:
    sim = Machine("abc123", "gpu-1", "amd64/generic", ["b8:ce:f6:00:00:01", "b8:ce:f6:00:00:02"], "manual", {},
                  status=NodeStatus.DEPLOYED, ip_addresses=["10.64.16.9"])
    record = machine_json(sim)
    machine = parse_machine(record)
    assert len(record) == 79
    assert machine.macs == ("b8:ce:f6:00:00:01", "b8:ce:f6:00:00:02") and machine.boot_mac == "b8:ce:f6:00:00:01"
    assert (machine.status, machine.power_state, machine.ip_addresses) == (MaasStatus.DEPLOYED, "unknown",
                                                                           ("10.64.16.9",))


def _record(**fields: Any) -> dict[str, Any]:
    return {"system_id": "abc123", "hostname": "gpu-1", "status": 4, **fields}


def test_a_bond_or_vlan_sharing_its_parent_s_mac_lists_that_mac_once() -> None:
    """MAAS lists a bond, bridge or VLAN interface in interface_set with its parent's MAC."""
    interfaces = [{"type": "physical", "mac_address": "AA:BB:CC:00:00:01"},
                  {"type": "physical", "mac_address": "aa:bb:cc:00:00:02"},
                  {"type": "bond", "mac_address": "aa:bb:cc:00:00:01"},
                  {"type": "vlan", "mac_address": "aa:bb:cc:00:00:01"}]
    assert parse_machine(_record(interface_set=interfaces)).macs == ("aa:bb:cc:00:00:01", "aa:bb:cc:00:00:02")


def test_a_null_boot_interface_message_and_power_state_read_as_none_empty_and_unknown() -> None:
    machine = parse_machine(_record(boot_interface=None, status_message=None, power_state=None, interface_set=[]))
    assert (machine.boot_mac, machine.status_message, machine.power_state) == (None, "", "unknown")


def test_oversized_lists_and_texts_are_cut_at_fixed_bounds() -> None:
    interfaces = [{"mac_address": f"aa:bb:cc:00:{i // 256:02x}:{i % 256:02x}"} for i in range(5000)]
    machine = parse_machine(_record(interface_set=interfaces, status_message="x" * 10_000_000,
                                    ip_addresses=[f"10.0.{i // 256}.{i % 256}" for i in range(5000)]))
    assert len(machine.macs) == MAX_INTERFACES and len(machine.status_message) == MAX_TEXT
    assert len(machine.ip_addresses) == 16


@pytest.mark.parametrize("fields", [
    {"interface_set": "eth0"}, {"interface_set": {"mac_address": "aa"}}, {"ip_addresses": "10.0.0.1"},
    {"status": "deployed"}, {"status": 99}, {"hostname": None} | {"system_id": None},
], ids=["interfaces-text", "interfaces-object", "addresses-text", "status-text", "status-unknown", "no-ids"])
def test_a_garbled_record_is_a_maas_error(fields: dict[str, Any]) -> None:
    record = {k: v for k, v in _record(**fields).items() if v is not None}
    with pytest.raises(MaasError, match="lacks or garbles"):
        parse_machine(record)


def test_interfaces_that_are_not_objects_are_skipped() -> None:
    # "aa:bb" is no MAC: MAAS's MACs are read with the one MAC contract (provision/state/identifiers.py)
    machine = parse_machine(_record(interface_set=[1, "x", None, {"mac_address": 7}, {"mac_address": "aa:bb"},
                                                   {"mac_address": "AA-BB-CC-DD-EE-01"}], boot_interface="eth0"))
    assert machine.macs == ("aa:bb:cc:dd:ee:01",) and machine.boot_mac is None
