"""The lab's Ethernet as designed and as built: one top-of-rack switch per rack, each host's BMC NIC on
port U and its PXE NIC on port 24+U, from the MACs the simulated BMCs report; then the faults applied
to the as-built side only (what the check must find):

    crossed: [HOST_A, HOST_B]   their PXE cables swapped at the switch
    unplugged: HOST             its PXE cable out: no MAC, the port notconnect
    err_disabled: HOST          its PXE port error-disabled: no MAC learnt
    silent: HOST                its PXE NIC links and speaks LLDP but sends nothing the port learns
                                (its traffic tagged for another VLAN, or the NIC not sending)

A host's PXE NIC speaks LLDP (lldpd on the host, as the OS image runs it): the switch port it is cabled
to hears its hostname, its interface name and its MAC as chassis id. BMC NICs do not.
    switch_faults: {SWITCH: refuse_login | hang | page | unknown_format | lldp_disabled | falls_behind}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.ethernet.rule import port_name as rule_port_name
from sim.addresses import switch_address

PORTS = 48
PXE_OFFSET = 24
BMC_VLAN, PXE_VLAN = 10, 20
SIM_SWITCH_PORT = 2022
_DOWN = {"cisco_nxos": "notconnec", "arista_eos": "notconnect", "dell_os10": "notconnect", "sonic": "notconnect"}
# NX-OS: see render.port_status; OS10 and SONiC show an error-disabled port as down (no word of their own)
_ERR = {"cisco_nxos": "err-disabled", "arista_eos": "errdisabled", "dell_os10": "err-disabled", "sonic": "err-disabled"}
TWO_PLATFORMS = ("cisco_nxos", "arista_eos")


@dataclass(frozen=True)
class LabHost:
    name: str
    rack: str
    u: int  # 1..24
    bmc_mac: str
    pxe_mac: str
    pxe_ifname: str = "eno1"


@dataclass
class EthernetFaults:
    crossed: list[tuple[str, str]] = field(default_factory=list)
    unplugged: list[str] = field(default_factory=list)
    err_disabled: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)
    switch_faults: dict[str, str] = field(default_factory=dict)


def port_name(platform: str, n: int) -> str:
    """Port n as the platform names it (the design rule's default names: Eth1/5, Et5, ethernet1/1/5, Ethernet4)."""
    return rule_port_name(platform, n)


def _switches(hosts: list[LabHost], platforms: tuple[str, ...]) -> dict[str, tuple[str, str, int]]:
    """rack -> (switch name, platform, index), the platforms taken in turn."""
    racks = sorted({h.rack for h in hosts})
    return {r: (f"tor-{r}", platforms[i % len(platforms)], i) for i, r in enumerate(racks)}


def build(hosts: list[LabHost], faults: EthernetFaults, credential: str = "switch_admin",
          username: str = "admin", password_env: str = "BRINGUP_SWITCH_PASSWORD",
          platforms: tuple[str, ...] = TWO_PLATFORMS) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Ethernet design file's data, the simulator's as-built data); racks take `platforms` in turn."""
    tors = _switches(hosts, platforms)
    design: dict[str, Any] = {"switches": {}, "nics": {}}
    ports: dict[str, dict[int, dict[str, Any]]] = {}
    for rack, (name, platform, i) in tors.items():
        design["switches"][name] = {"platform": platform, "address": switch_address(i), "port": SIM_SWITCH_PORT,
                                    "credential": credential, "location": rack}
        ports[name] = {n: {"name": port_name(platform, n), "status": _DOWN[platform], "macs": [], "lldp": [],
                           "vlan": BMC_VLAN if n <= PXE_OFFSET else PXE_VLAN} for n in range(1, PORTS + 1)}
    placed: dict[tuple[str, str], tuple[str, int]] = {}
    for h in hosts:
        name, platform, _ = tors[h.rack]
        nics = {}
        for role, n, mac, vlan in (("bmc", h.u, h.bmc_mac, BMC_VLAN), ("pxe", PXE_OFFSET + h.u, h.pxe_mac, PXE_VLAN)):
            nics[role] = {"switch": name, "port": port_name(platform, n), "mac": mac, "vlan": vlan}
            placed[(h.name, role)] = (name, n)
        design["nics"][h.name] = nics
    by_name = {h.name: h for h in hosts}
    macs = {(h.name, "bmc"): h.bmc_mac for h in hosts} | {(h.name, "pxe"): h.pxe_mac for h in hosts}
    for a, b in faults.crossed:
        placed[(a, "pxe")], placed[(b, "pxe")] = placed[(b, "pxe")], placed[(a, "pxe")]
    for (host, role), (sw, n) in placed.items():
        port = ports[sw][n]
        platform = design["switches"][sw]["platform"]
        if role == "pxe" and host in faults.unplugged:
            continue
        if role == "pxe" and host in faults.err_disabled:
            port["status"] = _ERR[platform]
            continue
        port["status"] = "connected"
        if role == "pxe":
            port["lldp"].append([host, by_name[host].pxe_ifname, macs[(host, role)]])
        if not (role == "pxe" and host in faults.silent):
            port["macs"].append([macs[(host, role)], port["vlan"]])
    asbuilt = {"username": username, "password_env": password_env, "switches": [
        {"name": sw, **{k: design["switches"][sw][k] for k in ("platform", "address", "port")},
         "fault": faults.switch_faults.get(sw, ""), "ports": [ports[sw][n] for n in sorted(ports[sw])]}
        for sw in sorted(ports)]}
    return design, asbuilt
