"""The Ethernet design's rule "rack's top-of-rack switch, port = U position" (provision/ethernet/rule.py):
expanded to explicit placements at load time, explicit entries winning, and every placement it cannot make
reported with the host, rack or port at fault."""

from __future__ import annotations

import pytest

from provision.ethernet.design import EthernetDesignError, parse_design
from provision.ethernet.rule import Position

SWITCHES = """
switches:
  tor-r1: {platform: cisco_nxos, address: 127.0.48.1, credential: sw, location: r1}
  tor-r2: {platform: arista_eos, address: 127.0.48.2, credential: sw, location: r2, ports: 32}
"""
RULE = SWITCHES + """
rule:
  bmc: {vlan: 10}
  pxe: {offset: 24, vlan: 20}
  roles: [gpu]
"""
POSITIONS = [Position("gpu-r1-01", "r1", 3, "gpu"), Position("gpu-r2-01", "r2", 5, "gpu"),
             Position("stor-r1-01", "r1", 40, "storage")]


def _placed(text: str, positions: list[Position]) -> dict[tuple[str, str], tuple[str, str, int | None]]:
    design = parse_design(text, "ethernet.yml", positions)
    return {(h, role): (p.switch, p.port, p.vlan) for h, role, p in design.placements()}


def test_the_rule_puts_each_hosts_nics_on_its_racks_switch_at_its_u_position_named_as_the_platform_does() -> None:
    assert _placed(RULE, POSITIONS) == {
        ("gpu-r1-01", "bmc"): ("tor-r1", "Eth1/3", 10), ("gpu-r1-01", "pxe"): ("tor-r1", "Eth1/27", 20),
        ("gpu-r2-01", "bmc"): ("tor-r2", "Et5", 10), ("gpu-r2-01", "pxe"): ("tor-r2", "Et29", 20)}


def test_an_explicit_entry_wins_for_its_role_and_a_platforms_prefix_and_offset_apply() -> None:
    text = RULE + """  platforms: {cisco_nxos: {prefix: "Ethernet1/", offset: 2}}
nics:
  gpu-r1-01:
    pxe: {switch: tor-r2, port: Et1}
"""
    got = _placed(text, POSITIONS)
    assert got[("gpu-r1-01", "pxe")] == ("tor-r2", "Et1", None)
    assert got[("gpu-r1-01", "bmc")] == ("tor-r1", "Ethernet1/5", 10)


def test_unknown_racks_ports_out_of_range_and_two_hosts_on_one_port_are_all_reported() -> None:
    text = RULE + """  racks: {r9: tor-r1}
nics:
  gpu-r1-01:
    bmc: {switch: tor-r1, port: Eth1/27}
"""
    positions = [*POSITIONS, Position("gpu-r2-12", "r2", 12, "gpu"), Position("gpu-r3-01", "r3", 1, "gpu")]
    with pytest.raises(EthernetDesignError) as e:
        parse_design(text, "ethernet.yml", positions)
    message = str(e.value)
    assert "rule.racks: unknown rack 'r9' (not in the site)" in message
    assert "gpu-r3-01 bmc: rack r3 has no top-of-rack switch" in message
    assert "gpu-r2-12 pxe: U12 gives port 36 on tor-r2, out of range 1..32" in message
    assert "tor-r1 eth1/27: two hosts on one port (gpu-r1-01 bmc, gpu-r1-01 pxe)" in message


def test_a_design_with_a_rule_is_refused_without_the_sites_racks() -> None:
    with pytest.raises(EthernetDesignError, match="its rule needs the site's racks"):
        parse_design(RULE, "ethernet.yml")
    assert parse_design(SWITCHES, "ethernet.yml").nics == {}  # an explicit design needs none
