"""The comparison on switch views read through the real templates from the simulator's tables (no SSH):
every finding the issue names, with both ends and a fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.ethernet.compare import NicResult, compare
from provision.ethernet.design import EthernetDesign
from provision.ethernet.names import advertised_names
from provision.ethernet.parse import LldpNeighbour, parse_lldp, parse_macs, parse_ports
from provision.ethernet.switches import SwitchView
from sim.switches.asbuilt import EthernetFaults
from sim.switches.render import lldp_detail, mac_table, port_status
from sim.switches.server import switches_from
from tests.ethernet.conftest import FAULTS, lab


def _views(design: EthernetDesign, asbuilt: dict[str, Any], unread: str = "") -> dict[str, SwitchView]:
    views = {}
    for sw in switches_from(asbuilt):
        v = SwitchView(sw.name, design.switches[sw.name])
        if sw.name == unread:
            v.reason = "login refused for user 'admin'"
        else:
            v.macs = parse_macs(sw.platform, mac_table(sw))
            v.ports = {p.key: p for p in parse_ports(sw.platform, port_status(sw))}
            for n in parse_lldp(sw.platform, lldp_detail(sw)):
                v.lldp.setdefault(n.key, []).append(n)
            v.state = "ok"
        views[sw.name] = v
    return views


def _by(results: list[NicResult]) -> dict[tuple[str, str], NicResult]:
    return {(r.host, r.role): r for r in results}


def test_crossed_unplugged_and_err_disabled_cables_are_found_with_their_fix() -> None:
    design, asbuilt = lab(2, 12, FAULTS)
    results = _by(compare(design, _views(design, asbuilt), {}))
    bad = {k: r.status for k, r in results.items() if r.status != "ok"}
    assert bad == {("gpu-r1-03", "pxe"): "wrong_port", ("gpu-r1-04", "pxe"): "wrong_port",
                   ("gpu-r1-06", "pxe"): "not_seen",
                   ("gpu-r2-07", "pxe"): "not_seen", ("gpu-r2-09", "pxe"): "err_disabled"}
    crossed = results[("gpu-r1-03", "pxe")]
    assert crossed.swap_with == "gpu-r1-04 pxe" and crossed.fix == (
        "swap these two cables: tor-r1 Eth1/27 (gpu-r1-03 pxe) <-> tor-r1 Eth1/28 (gpu-r1-04 pxe)")
    assert crossed.reason == "seen on tor-r1 Eth1/28, designed tor-r1 Eth1/27; LLDP on tor-r1 Eth1/27 hears gpu-r1-04 eno1"
    assert crossed.lldp_seen == [{"switch": "tor-r1", "port": "Eth1/28", "port_id": "eno1"}]
    unplugged = results[("gpu-r2-07", "pxe")]
    assert unplugged.reason.startswith("unplugged: not seen on any switch; designed port tor-r2 Et31 has no link")


def test_a_nic_lldp_hears_on_its_port_without_a_learnt_mac_is_not_seen_with_that_evidence() -> None:
    design, asbuilt = lab(2, 12, FAULTS)
    silent = _by(compare(design, _views(design, asbuilt), {}))[("gpu-r1-06", "pxe")]
    assert (silent.status, silent.reason) == ("not_seen", "link up on tor-r1 Eth1/30, LLDP sees gpu-r1-06 eno1, "
                                              "no MAC learnt: wrong VLAN or the NIC is not sending")
    assert silent.lldp_designed == [{"name": "gpu-r1-06", "port_id": "eno1", "chassis": "02:00:00:01:02:06"}]


def test_a_nic_only_lldp_hears_on_another_port_is_wrong_port_and_the_designed_ports_neighbour_is_named() -> None:
    design, asbuilt = lab(1, 4, EthernetFaults(silent=["gpu-r1-01"]))
    ports = asbuilt["switches"][0]["ports"]
    ports[40]["lldp"], ports[24]["lldp"] = ports[24]["lldp"], [["gpu-r9-09.lab", "eno2", "02:00:00:09:02:09"]]
    r = _by(compare(design, _views(design, asbuilt), {}))[("gpu-r1-01", "pxe")]
    assert (r.status, r.fix) == ("wrong_port", "move the cable from tor-r1 Eth1/41 to tor-r1 Eth1/25")
    assert r.reason == ("LLDP hears gpu-r1-01 eno1 on tor-r1 Eth1/41 (no MAC learnt there), designed tor-r1 Eth1/25; "
                        "LLDP on tor-r1 Eth1/25 hears gpu-r9-09.lab eno2")


def test_a_nic_on_another_free_port_is_wrong_port_without_a_swap() -> None:
    design, asbuilt = lab(1, 4, EthernetFaults())
    port = asbuilt["switches"][0]["ports"]
    port[40]["macs"], port[24]["macs"] = port[24]["macs"], []  # gpu-r1-01's PXE moved from Eth1/25 to Eth1/41
    r = _by(compare(design, _views(design, asbuilt), {}))[("gpu-r1-01", "pxe")]
    assert (r.status, r.swap_with, r.fix) == ("wrong_port", None, "move the cable from tor-r1 Eth1/41 to tor-r1 Eth1/25")


def test_a_mac_on_two_ports_and_a_port_in_the_wrong_vlan_are_reported() -> None:
    design, asbuilt = lab(1, 4, EthernetFaults())
    ports = asbuilt["switches"][0]["ports"]
    ports[44]["macs"] = list(ports[25]["macs"])  # gpu-r1-02's PXE MAC also on Eth1/45
    ports[26]["macs"] = []
    ports[26]["vlan"] = 99  # gpu-r1-03's PXE port up in VLAN 99, nothing learnt
    got = _by(compare(design, _views(design, asbuilt), {}))
    assert got[("gpu-r1-02", "pxe")].status == "seen_twice"
    assert "tor-r1 Eth1/26, tor-r1 Eth1/45" in got[("gpu-r1-02", "pxe")].reason
    assert (got[("gpu-r1-03", "pxe")].status, got[("gpu-r1-03", "pxe")].fix) == ("wrong_vlan", "put tor-r1 Eth1/27 in VLAN 20")


def test_nics_of_an_unread_switch_are_unknown_with_its_reason_and_harvested_macs_win() -> None:
    design, asbuilt = lab(2, 2, EthernetFaults())
    harvested = {("gpu-r2-01", "pxe"): "02:00:00:01:02:02"}  # the MAC the BMC reports is gpu-r1-02's port's
    got = _by(compare(design, _views(design, asbuilt, unread="tor-r1"), harvested))
    assert got[("gpu-r1-01", "bmc")].status == "unknown"
    assert "tor-r1 could not be read: login refused" in got[("gpu-r1-01", "bmc")].reason
    moved = got[("gpu-r2-01", "pxe")]  # seen nowhere readable: the unread switch is named
    assert moved.status == "not_seen" and moved.reason.endswith("(not read: tor-r1; it may be plugged there)")
    assert got[("gpu-r2-02", "pxe")].status == "ok"


def test_the_embedded_sites_ethernet_design_is_the_one_the_simulator_serves() -> None:
    from provision.site import load_site
    from sim.switches.embedded import design_text, embedded

    site = load_site(Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml")
    assert (site.directory / "ethernet.yml").read_text() == design_text(site)
    design, asbuilt = embedded(site)
    assert {n: s.model_dump(exclude={"ports"}) for n, s in site.spec.switches.items()} == design["switches"]
    served = {p["name"]: p for s in asbuilt["switches"] if s["name"] == "tor-r2" for p in s["ports"]}
    assert design["nics"]["gpu-r2-07"]["pxe"]["port"] == "Et31" and served["Et31"]["macs"] == []  # unplugged


def test_sim_up_gives_the_switch_simulator_its_password_in_the_environment_never_in_argv(tmp_path: Path) -> None:
    from provision.site import load_site
    from sim.lab import LabContext
    from sim.switches.embedded import PASSWORD_VARIABLE
    from sim.switches.service import services

    site = load_site(Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml")
    secret = "switch-secret-in-env-only"
    [svc] = services(LabContext(site, tmp_path, {PASSWORD_VARIABLE: secret}))
    assert svc.env == {PASSWORD_VARIABLE: secret}
    assert secret not in " ".join(svc.argv) and secret not in (tmp_path / "switches" / "asbuilt.json").read_text()


def test_a_bmc_lldp_names_under_its_own_name_fqdn_or_port_description_is_still_matched() -> None:
    design, asbuilt = lab(1, 4, EthernetFaults())
    ports = asbuilt["switches"][0]["ports"]  # BMC NICs on Eth1/1..4; none of them speaks LLDP here
    # gpu-r1-01's BMC cable is in Eth1/45 (its MAC not learnt: the BMC VLAN is not on that port), its LLDP
    # system name the BMC's FQDN, chassis id its service tag (not a MAC)
    ports[0]["macs"], ports[0]["status"] = [], "notconnec"
    ports[44]["lldp"] = [["gpu-r1-01-bmc.mgmt.example", "NIC.Embedded.1", "7XYZ123"]]
    # gpu-r1-02's BMC on its own port, heard as the iDRAC default name with the host in the port description
    ports[1]["macs"] = []
    views = _views(design, asbuilt)
    views["tor-r1"].lldp["eth1/2"] = [LldpNeighbour("Eth1/2", "eth1/2", "idrac-abc1234", "NIC.Embedded.1", "",
                                                    "gpu-r1-02 iDRAC")]
    got = _by(compare(design, views, {}, names={("gpu-r1-02", "bmc"): frozenset({"idrac-abc1234"})}))
    moved = got[("gpu-r1-01", "bmc")]
    assert (moved.status, moved.fix) == ("wrong_port", "move the cable from tor-r1 Eth1/45 to tor-r1 Eth1/1")
    here = got[("gpu-r1-02", "bmc")]
    assert here.status == "not_seen" and "LLDP sees gpu-r1-02 NIC.Embedded.1" in here.reason
    # by the port description alone (no names given): the default names hold only the host's own suffixes
    assert _by(compare(design, views, {}))[("gpu-r1-02", "bmc")].lldp_seen == []
    views["tor-r1"].lldp["eth1/2"] = [LldpNeighbour("Eth1/2", "eth1/2", "Not Advertised", "1", "", "gpu-r1-02-bmc")]
    assert _by(compare(design, views, {}))[("gpu-r1-02", "bmc")].lldp_seen == [
        {"switch": "tor-r1", "port": "Eth1/2", "port_id": "1"}]


def test_a_pxe_nics_lldp_is_never_taken_for_its_bmcs() -> None:
    names = advertised_names("gpu-r1-01", "bmc", "gpu-r1-01-idrac.mgmt.example", "7XYZ123")
    assert "gpu-r1-01" not in names and {"gpu-r1-01-bmc", "gpu-r1-01-idrac", "idrac-7xyz123"} <= names
    assert advertised_names("gpu-r1-01.lab.example", "pxe") == {"gpu-r1-01"}
    assert "10.0.0.5" not in advertised_names("gpu-r1-01", "bmc", "10.0.0.5")


def test_a_system_name_dell_os10_cut_to_17_characters_still_matches_the_nic_it_starts() -> None:
    design, asbuilt = lab(1, 2, EthernetFaults())
    ports = asbuilt["switches"][0]["ports"]
    ports[0]["macs"], ports[0]["status"] = [], "notconnec"  # gpu-r1-01's BMC cable not in Eth1/1 ...
    views = _views(design, asbuilt)  # ... but in Eth1/40, heard as OS10 prints a long name: cut, "..."
    views["tor-r1"].lldp["eth1/40"] = [LldpNeighbour("Eth1/40", "eth1/40", "gpu-r1-01-bmc.mgm...", "1", "")]
    r = _by(compare(design, views, {}))[("gpu-r1-01", "bmc")]
    assert (r.status, r.fix) == ("wrong_port", "move the cable from tor-r1 Eth1/40 to tor-r1 Eth1/1")
    # cut inside the first label: matched by its start (the iDRAC default name, from the service tag)
    views["tor-r1"].lldp["eth1/40"] = [LldpNeighbour("Eth1/40", "eth1/40", "idrac-7xyz123abc...", "1", "")]
    names = {("gpu-r1-01", "bmc"): advertised_names("gpu-r1-01", "bmc", service_tag="7XYZ123ABCDE")}
    assert _by(compare(design, views, {}, names))[("gpu-r1-01", "bmc")].status == "wrong_port"
    views["tor-r1"].lldp["eth1/40"] = [LldpNeighbour("Eth1/40", "eth1/40", "idrac-7x...", "1", "")]  # too little left
    assert _by(compare(design, views, {}, names))[("gpu-r1-01", "bmc")].status == "not_seen"
