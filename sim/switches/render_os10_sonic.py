"""What a Dell OS10 and a SONiC management switch print for the three reads of `provision ethernet check`.

SONiC: the layouts of sonic-utilities' own outputs (Apache-2.0: doc/Command-Reference.md `show mac`,
`show interfaces status`, `show lldp neighbors`; tests/fdbshow_test.py and tests/intfutil_test.py, which
pin what today's fdbshow and intfutil print), copied in tests/fixtures/ethernet/ with their attribution.
The login lands in a Linux shell (`admin@switch:~$`); `show` is the click CLI there and pages nothing.

Dell OS10: `show mac address-table` and `show lldp neighbors` laid out as the captures in Intel's
mfd-switchmanagement tests (MIT, copied in tests/fixtures/ethernet/ with attribution: the `Codes:` line,
system names over 20 characters cut to 17 and "..."), `show interface status` as Dell's OS10 Enterprise
Edition User Guide documents it (reproduced, not copied). OS10 pages at `--more--` until
`terminal length 0` (the pager word is not from a capture: the reader compares it case-blind).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.switches.model import SimSwitch

OS10_RULE = "-" * 81 + "\n"
OS10_MAC_HEAD = ("Codes: pv <vlan-id> - private vlan where the mac is originally learnt\n"
                 "VlanId        Mac Address         Type        Interface\n")
OS10_STATUS_HEAD = (OS10_RULE + "Port            Description     Status   Speed    Duplex   Mode Vlan Tagged-Vlans\n"
                    + OS10_RULE)
OS10_LLDP_HEAD = ("Loc PortID          Rem Host Name        Rem Port Id                    Rem Chassis Id\n"
                  + "-" * 86 + "\n")
OS10_NAME_WIDTH = 20  # a longer system name is cut to 17 characters and "..."
HOST_DESCRIPTION = "Ubuntu 22.04.4 LTS Linux 5.15.0-105-generic #115-Ubuntu SMP x86_64"


def _up(status: str) -> bool:
    return status == "connected"


def os10_mac_table(sw: SimSwitch) -> str:
    return OS10_MAC_HEAD + "".join(f"{v:<13} {m:<19} {'dynamic':<11} {p.name}\n" for p in sw.ports for m, v in p.macs)


def _os10_short(name: str) -> str:
    """ethernet1/1/5 as `show interface status` names it: Eth 1/1/5."""
    return "Eth " + name.removeprefix("ethernet")


def os10_status(sw: SimSwitch) -> str:
    """An OS10 port without link (unplugged, error-disabled) is `down` here: Status has no other word for it."""
    return OS10_STATUS_HEAD + "".join(
        f"{_os10_short(p.name):<16}{'':<16}{'up' if _up(p.status) else 'down':<9}{'1G' if _up(p.status) else '0':<9}"
        f"{'full':<9}{'A':<5}{p.vlan:<5}-\n" for p in sw.ports)


def _os10_name(name: str) -> str:
    return name if len(name) <= OS10_NAME_WIDTH else name[:17] + "..."


def os10_lldp(sw: SimSwitch) -> str:
    return OS10_LLDP_HEAD + "".join(f"{p.name:<19} {_os10_name(n):<20} {pid:<29} {c}\n"
                                    for p in sw.ports for n, pid, c in p.lldp)


def sonic_mac_table(sw: SimSwitch) -> str:
    rows = [(v, m.upper(), p.name) for p in sw.ports for m, v in p.macs]
    head = ("  No.    Vlan  MacAddress         Port         Type\n"
            "-----  ------  -----------------  -----------  -------\n")
    body = "".join(f"{i:>5}  {v:>6}  {m}  {port:<11}  Dynamic\n" for i, (v, m, port) in enumerate(rows, start=1))
    return head + body + f"Total number of entries {len(rows)}\n"


def sonic_status(sw: SimSwitch) -> str:
    """intfutil's table (FEC and Vlan columns, as today's release prints them); a port without link is Oper down."""
    head = ("  Interface    Lanes    Speed    MTU    FEC      Alias    Vlan    Oper    Admin    Type    Asym PFC\n"
            "-----------  -------  -------  -----  -----  ---------  ------  ------  -------  ------  ----------\n")
    rows = "".join(
        f"{p.name:>11}  {i:>7}  {'1G':>7}  {9100:>5}  {'N/A':>5}  {'etp' + str(i + 1):>9}  {'access':>6}  "
        f"{'up' if _up(p.status) else 'down':>6}  {'up':>7}  {'RJ45':>6}  {'off':>10}\n"
        for i, p in enumerate(sw.ports))
    return head + rows


SONIC_RULE = "-" * 79 + "\n"


def _sonic_neighbour(port: str, rid: int, name: str, port_id: str, chassis: str) -> str:
    return (f"Interface:    {port}, via: LLDP, RID: {rid}, Time: 0 day, 00:01:11\n  Chassis:\n"
            f"    ChassisID:    mac {chassis}\n    SysName:      {name}\n    SysDescr:     {HOST_DESCRIPTION}\n"
            "    TTL:          120\n    Capability:   Bridge, off\n    Capability:   Router, off\n"
            "    Capability:   Wlan, off\n    Capability:   Station, on\n"
            f"  Port:\n    PortID:       ifname {port_id}\n    PortDescr:    {port_id}\n" + SONIC_RULE)


def sonic_lldp(sw: SimSwitch) -> str:
    found = [(p.name, *n) for p in sw.ports for n in p.lldp]
    return SONIC_RULE + "LLDP neighbors:\n" + SONIC_RULE + "".join(
        _sonic_neighbour(port, rid, *n) for rid, (port, *n) in enumerate(found, start=1))


def os10_answer(sw: SimSwitch, words: str) -> str:
    table = {"show mac address-table": os10_mac_table, "show interface status": os10_status,
             "show lldp neighbors": os10_lldp}
    if words in table:
        return table[words](sw)
    if words == "terminal length 0" or words.startswith("terminal width"):
        return ""
    return "% Error: Unrecognized command.\n"


def sonic_answer(sw: SimSwitch, words: str) -> str:
    table = {"show mac": sonic_mac_table, "show interfaces status": sonic_status, "show lldp neighbors": sonic_lldp}
    if words in table:
        return table[words](sw)
    if words.startswith("show "):
        return (f'Usage: show [OPTIONS] COMMAND [ARGS]...\nTry "show -h" for help.\n\n'
                f'Error: No such command "{words.split()[1]}".\n')
    return f"-bash: {words.split()[0]}: command not found\n"
