"""ntc-templates on real captures (ntc-templates' own fixtures, tests/fixtures/ethernet/README.md), and the
simulator's tables read by the same templates as the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.ethernet.design import normalise_port
from provision.ethernet.parse import (
    COMMANDS,
    UnknownFormat,
    parse_errdisabled,
    parse_lldp,
    parse_macs,
    parse_ports,
)
from provision.state.identifiers import canonical_mac
from sim.switches.model import SimPort, SimSwitch
from sim.switches.render import answer

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


@pytest.mark.parametrize("platform", ["cisco_nxos", "arista_eos", "dell_os10", "sonic"])
def test_the_simulators_tables_read_back_through_the_real_templates(platform: str) -> None:
    name = {"cisco_nxos": "Eth1/5", "arista_eos": "Et5", "dell_os10": "ethernet1/1/5", "sonic": "Ethernet5"}[platform]
    sw = SimSwitch("tor", platform, "127.0.48.1", 2022, [
        SimPort(name, "connected", 20, [("02:00:00:00:02:05", 20)], [("gpu-r1-05", "eno1", "02:00:00:00:02:05")]),
        SimPort(name.replace("5", "6"), "notconnect" if platform == "arista_eos" else "notconnec", 20)])
    def read(what: str) -> str:
        return answer(sw, COMMANDS[platform][what][0])

    assert [(m.mac, m.vlan, m.key) for m in parse_macs(platform, read("macs"))] == [
        ("02:00:00:00:02:05", 20, normalise_port(name))]
    vlan = "access" if platform == "sonic" else "20"  # SONiC's Vlan column is the port's mode
    assert [(p.key, p.state, p.vlan) for p in parse_ports(platform, read("ports"))] == [
        (normalise_port(name), "up", vlan), (normalise_port(name.replace("5", "6")), "down", vlan)]
    assert [(n.key, n.name, n.port_id, n.chassis) for n in parse_lldp(platform, read("lldp"))] == [
        (normalise_port(name), "gpu-r1-05", "eno1", "02:00:00:00:02:05")]


def test_an_answer_without_the_table_header_is_an_unknown_format_not_an_empty_table() -> None:
    with pytest.raises(UnknownFormat, match="without its table header"):
        parse_macs("cisco_nxos", "% Permission denied for the role\n")


def test_macs_and_ports_compare_in_one_spelling() -> None:
    assert canonical_mac("5087.89A1.DE75") == canonical_mac("50-87-89-a1-de-75") == "50:87:89:a1:de:75"
    assert normalise_port("Ethernet1/26") == normalise_port("Eth1/26") == "eth1/26" and normalise_port("Et7") == "eth7"


def test_real_sonic_tables_parse_through_our_templates_in_both_releases_layouts() -> None:
    macs = parse_macs("sonic", _raw("sonic_show_mac_fdbshow.raw"))
    assert [(m.mac, m.vlan, m.port) for m in macs][:2] == [("11:22:33:44:55:66", 2, "Ethernet0"),
                                                           ("11:22:33:66:55:44", 3, "Ethernet4")]
    assert len(parse_macs("sonic", _raw("sonic_show_mac.raw"))) == 18
    old = {p.port: p.state for p in parse_ports("sonic", _raw("sonic_show_interfaces_status.raw"))}
    assert old == {"Ethernet0": "down", "Ethernet4": "down", "Ethernet8": "admin-down"}  # Admin down wins
    new = {p.port: (p.state, p.vlan) for p in parse_ports("sonic", _raw("sonic_show_interfaces_status_intfutil.raw"))}
    assert new["Ethernet0"] == ("down", "routed") and new["Ethernet24"] == ("up", "trunk") and len(new) == 15
    lldp = parse_lldp("sonic", _raw("sonic_show_lldp_neighbors.raw"))
    assert [(n.key, n.name, n.port_id, n.chassis, n.description) for n in lldp] == [
        ("eth0", "swtor-b2lab2-1610", "GigabitEthernet 0/2", "00:01:e8:81:e3:45", ""),
        ("eth116", "T1-2", "hundredGigE1/2", "4c:76:25:e7:f0:c0", "T0-2:hundredGigE1/30")]


def test_dell_os10_tables_parse_through_our_templates_real_cut_names_and_breakout_ports_included() -> None:
    macs = parse_macs("dell_os10", _raw("dell_os10_show_mac_address-table.raw"))  # with its `Codes:` line
    assert [(m.mac, m.vlan, m.key) for m in macs] == [("3c:fd:fe:aa:bb:cc", 1, "eth1/1/12:1")]
    lldp = {n.key: (n.name, n.port_id, n.chassis) for n in parse_lldp("dell_os10", _raw("dell_os10_show_lldp_neighbors.raw"))}
    assert lldp == {"eth1/1/3:1": ("Not Advertised", "00:78:57:aa:bb:cc", ""),  # chassis id not a MAC
                    "eth1/1/31": ("B-R03-U23-Mellano...", "Eth1/32", "24:8a:07:bb:cc:aa"),
                    "mgmt1/1/1": ("LAB-7103-B-R04", "19", "00:04:96:dd:ff:aa")}
    ports = {p.key: (p.port, p.state, p.vlan) for p in parse_ports("dell_os10", _raw("dell_os10_show_interface_status.txt"))}
    assert ports == {"eth1/1/1": ("Eth 1/1/1", "up", "1"), "eth1/1/2": ("Eth 1/1/2", "up", "1"),
                     "eth1/1/3": ("Eth 1/1/3", "down", "20")}


def test_a_real_nxos_port_error_disabled_by_link_flaps_reads_err_disabled_not_a_refused_table() -> None:
    [port] = parse_ports("cisco_nxos", _raw("cisco_nxos_show_interface_status_linkflap.raw"))
    assert (port.port, port.state, port.raw) == ("Eth1/15", "err-disabled", "linkFlapE")


@pytest.mark.parametrize("platform", ["dell_os10", "sonic"])
def test_a_line_our_templates_do_not_know_inside_a_table_is_an_unknown_format(platform: str) -> None:
    head = "VlanId  Mac Address         Type        Interface\n" if platform == "dell_os10" else (
        "  No.    Vlan  MacAddress         Port         Type\n")
    with pytest.raises(UnknownFormat, match="TextFSMError"):
        parse_macs(platform, head + "this is not a row of the table\n")


def test_an_answer_naming_the_header_words_without_the_header_line_is_an_unknown_format_not_no_rows() -> None:
    with pytest.raises(UnknownFormat, match="header line was not found"):
        parse_macs("dell_os10", "% Error: Mac Address table unavailable\n")
