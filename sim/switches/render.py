"""What each simulated NOS prints: prompts, paging, command answers.

The table headers and row layouts are those of real captures: ntc-templates' own test fixtures
(Apache-2.0, https://github.com/networktocode/ntc-templates, tests/cisco_nxos/show_mac_address-table,
tests/cisco_nxos/show_interface_status, tests/arista_eos/show_mac_address-table,
tests/arista_eos/show_interfaces_status, tests/cisco_nxos/show_lldp_neighbors_detail,
tests/arista_eos/show_lldp_neighbors_detail), copied in tests/fixtures/ethernet/ with their attribution;
NX-OS's error-disabled port as genieparser's capture shows it (`linkFlapE`). Dell OS10 and SONiC:
sim/switches/render_os10_sonic.py.
"""

from __future__ import annotations

from sim.switches.model import SimSwitch
from sim.switches.render_os10_sonic import os10_answer, sonic_answer

PAGE_LINES = 24
MORE = "--More--"


def _dotted(mac: str) -> str:
    d = mac.replace(":", "").lower()
    return f"{d[0:4]}.{d[4:8]}.{d[8:12]}"


NXOS_MAC_HEAD = """Legend:
        * - primary entry, G - Gateway MAC, (R) - Routed MAC, O - Overlay MAC
        age - seconds since last seen,+ - primary entry using vPC Peer-Link,
        (T) - True, (F) - False
     VLAN       MAC Address       Type     age    Secure  NTFY     Ports
------------+-----------------+----------+-------+------+------+------------------
"""
NXOS_STATUS_HEAD = """--------------------------------------------------------------------------------
Port          Name               Status    Vlan      Duplex  Speed   Type
--------------------------------------------------------------------------------
"""
EOS_MAC_HEAD = """          Mac Address Table
------------------------------------------------------------------

Vlan    Mac Address       Type        Ports      Moves   Last Move
----    -----------       ----        -----      -----   ---------
"""
EOS_STATUS_HEAD = "Port       Name                   Status       Vlan        Duplex  Speed Type\n"


def mac_table(sw: SimSwitch) -> str:
    rows = [(vlan, mac, p.name) for p in sw.ports for mac, vlan in p.macs]
    if sw.platform == "cisco_nxos":
        body = "".join(f"*    {v:<8} {_dotted(m)}   dynamic    0        F      F    {port}\n" for v, m, port in rows)
        return NXOS_MAC_HEAD + body
    body = "".join(f"{v:>4}    {_dotted(m)}    DYNAMIC     {port:<10} 1       0:01:{i % 60:02d} ago\n"
                   for i, (v, m, port) in enumerate(rows))
    return EOS_MAC_HEAD + body + f"Total Mac Addresses for this criterion: {len(rows)}\n"


NXOS_ERRDISABLED_HEAD = """--------------------------------------------------------------------------------
Port         Name               Status             Reason
--------------------------------------------------------------------------------
"""


def port_status(sw: SimSwitch) -> str:
    if sw.platform == "cisco_nxos":  # error-disabled by link flaps: `linkFlapE` (the 9-column word of a real one)
        return NXOS_STATUS_HEAD + "".join(
            f"{p.name:<13} {'--':<18} {'linkFlapE' if p.status == 'err-disabled' else p.status:<9} {p.vlan:<9} "
            f"{'full':<7} {'1000':<7} 1000base-T\n" for p in sw.ports)
    return EOS_STATUS_HEAD + "".join(
        f"{p.name:<10} {'':<22} {p.status:<12} {p.vlan:<11} a-full  a-1G  1000BASE-T\n" for p in sw.ports)


NXOS_LLDP_HEAD = """Capability codes:
  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device
  (W) WLAN Access Point, (P) Repeater, (S) Station, (O) Other
Device ID            Local Intf      Hold-time  Capability  Port ID  \n
"""
HOST_DESCRIPTION = "Ubuntu 22.04.4 LTS Linux 5.15.0-105-generic #115-Ubuntu SMP x86_64"


def _nxos_neighbour(port: str, name: str, port_id: str, chassis: str) -> str:
    return (f"Chassis id: {_dotted(chassis)}\nPort id: {port_id}\nLocal Port id: {port}\nPort Description: {port_id}\n"
            f"System Name: {name}\nSystem Description: {HOST_DESCRIPTION}\nTime remaining: 97 seconds\n"
            "System Capabilities: B, W, R, S\nEnabled Capabilities: S\nManagement Address: not advertised\n"
            "Vlan ID: not advertised\n\n\n")


def _eos_neighbours(port: str, found: list[tuple[str, str, str]]) -> str:
    head = f"Interface Ethernet{port.removeprefix('Et')} detected {len(found)} LLDP neighbors:\n\n"
    return head + "".join(
        f'  Neighbor {_dotted(c)}/"{pid}", age 12 seconds\n  Discovered 0:01:11 ago; Last changed 0:01:11 ago\n'
        f"  - Chassis ID type: MAC address (4)\n    Chassis ID     : {_dotted(c)}\n"
        f'  - Port ID type: Interface name (5)\n    Port ID     : "{pid}"\n  - Time To Live: 120 seconds\n'
        f'  - Port Description: "{pid}"\n  - System Name: "{n}"\n  - System Description: "{HOST_DESCRIPTION}"\n'
        "  - System Capabilities : Bridge, Router, WLAN Access Point, Station Only\n"
        "    Enabled Capabilities: Station Only\n  - IEEE802.3 Maximum Frame Size: 1514 bytes\n\n"
        for n, pid, c in found)


def lldp_detail(sw: SimSwitch) -> str:
    """`show lldp neighbors detail` as each NOS prints it (the captures in tests/fixtures/ethernet)."""
    if sw.platform == "cisco_nxos":
        found = [(p.name, *n) for p in sw.ports for n in p.lldp]
        return (NXOS_LLDP_HEAD + "".join(_nxos_neighbour(*f) for f in found)
                + f"Total entries displayed: {len(found)}\n")
    return "".join(_eos_neighbours(p.name, p.lldp) for p in sw.ports)


def prompt(sw: SimSwitch, user: str = "admin") -> str:
    if sw.platform == "sonic":  # a Linux login shell
        return f"{user}@{sw.name}:~$ "
    return f"{sw.name}>" if sw.platform == "arista_eos" else f"{sw.name}#"


def pager(sw: SimSwitch) -> str:
    return "--more--" if sw.platform == "dell_os10" else MORE


def answer(sw: SimSwitch, command: str) -> str:
    """The text a command prints (without the prompt). Abbreviations as the NOS accepts them are not needed:
    netmiko sends the full words."""
    words = " ".join(command.split())
    eos = sw.platform == "arista_eos"
    if words in ("", "exit"):
        return ""
    if sw.platform == "dell_os10":
        return os10_answer(sw, words)
    if sw.platform == "sonic":
        return sonic_answer(sw, words)
    if words == "terminal length 0":
        return "Pagination disabled.\n" if eos else ""
    if words.startswith("terminal width"):
        return f"Width set to {words.split()[-1]} columns.\n" if eos else ""
    if words == "show mac address-table":
        return mac_table(sw)
    if words == ("show interfaces status" if eos else "show interface status"):
        return port_status(sw)
    if words == "show lldp neighbors detail":
        return lldp_detail(sw)
    if words == "show interface status err-disabled" and not eos:
        return NXOS_ERRDISABLED_HEAD + "".join(f"{p.name:<12} {'--':<18} {'linkFlapErr':<18} linkFlapErrDisabled\n"
                                               for p in sw.ports if p.status == "err-disabled")
    if eos:
        return "% Invalid input\n"
    return "                      ^\n% Invalid command at '^' marker.\n"
