"""ntc-templates on real captures (ntc-templates' own fixtures, tests/fixtures/ethernet/README.md), and the
simulator's tables read by the same templates as the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.ethernet.design import normalise_mac, normalise_port
from provision.ethernet.parse import UnknownFormat, parse_errdisabled, parse_lldp, parse_macs, parse_ports
from sim.switches.render import SimPort, SimSwitch, lldp_detail, mac_table, port_status

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ethernet"


def _raw(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_real_nxos_mac_table_and_port_states_parse_to_normalised_rows() -> None:
    macs = parse_macs("cisco_nxos", _raw("cisco_nxos_show_mac_address-table.raw"))
    assert ("00:0e:00:0e:00:0e", 145, "Po10") in [(m.mac, m.vlan, m.port) for m in macs]
    ports = {p.port: p.state for p in parse_ports("cisco_nxos", _raw("cisco_nxos_show_interface_status.raw"))}
    assert (ports["mgmt0"], ports["Eth1/1"], ports["Eth1/3"]) == ("up", "admin-down", "down")


def test_real_nxos_err_disabled_listing_names_each_port_and_why() -> None:
    got = parse_errdisabled("cisco_nxos", _raw("cisco_nxos_show_interface_status_err-disabled.raw"))
    assert got["eth3"] == "err-disabled Error disabled" and got["eth1"] == "linkFlapErr linkFlapErrDisabled"


def test_real_eos_mac_table_and_errdisabled_port_parse() -> None:
    macs = parse_macs("arista_eos", _raw("arista_eos_show_mac_address-table.raw"))
    assert ("00:1c:73:13:a3:de", 55, "eth32") in [(m.mac, m.vlan, m.key) for m in macs]
    ports = {p.port: p.state for p in parse_ports("arista_eos", _raw("arista_eos_show_interfaces_status.raw"))}
    assert (ports["Et3/2/2"], ports["Et3/1/1"], ports["Et3/2/1"]) == ("err-disabled", "up", "down")


def test_real_lldp_neighbour_details_of_both_platforms_parse_to_local_port_name_and_port_id() -> None:
    nxos = parse_lldp("cisco_nxos", _raw("cisco_nxos_show_lldp_neighbors_detail.raw"))
    assert [(n.key, n.host, n.port_id, n.chassis) for n in nxos][1] == (
        "eth1/1", "n9k2", "Ethernet1/1", "50:87:89:a1:d8:d6")
    eos = {(n.key, n.name, n.port_id) for n in parse_lldp("arista_eos", _raw("arista_eos_show_lldp_neighbors_detail.raw"))}
    assert ("eth9", "Leaf1.cliqr.com", "Eth1/23") in eos and ("management1", "vmx1", "fxp0") in eos


@pytest.mark.parametrize("platform", ["cisco_nxos", "arista_eos"])
def test_the_simulators_tables_read_back_through_the_real_templates(platform: str) -> None:
    name = "Eth1/5" if platform == "cisco_nxos" else "Et5"
    sw = SimSwitch("tor", platform, "127.0.48.1", 2022, [
        SimPort(name, "connected", 20, [("02:00:00:00:02:05", 20)], [("gpu-r1-05", "eno1", "02:00:00:00:02:05")]),
        SimPort(name.replace("5", "6"), "notconnect" if platform == "arista_eos" else "notconnec", 20)])
    assert [(m.mac, m.vlan, m.key) for m in parse_macs(platform, mac_table(sw))] == [
        ("02:00:00:00:02:05", 20, normalise_port(name))]
    assert [(p.port, p.state, p.vlan) for p in parse_ports(platform, port_status(sw))] == [
        (name, "up", "20"), (name.replace("5", "6"), "down", "20")]
    assert [(n.key, n.name, n.port_id, n.chassis) for n in parse_lldp(platform, lldp_detail(sw))] == [
        (normalise_port(name), "gpu-r1-05", "eno1", "02:00:00:00:02:05")]


def test_an_answer_without_the_table_header_is_an_unknown_format_not_an_empty_table() -> None:
    with pytest.raises(UnknownFormat, match="without its table header"):
        parse_macs("cisco_nxos", "% Permission denied for the role\n")


def test_macs_and_ports_compare_in_one_spelling() -> None:
    assert normalise_mac("5087.89A1.DE75") == normalise_mac("50-87-89-a1-de-75") == "50:87:89:a1:de:75"
    assert normalise_port("Ethernet1/26") == normalise_port("Eth1/26") == "eth1/26" and normalise_port("Et7") == "eth7"
