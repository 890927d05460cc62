"""TextFSM templates of our own for the commands ntc-templates 9.3 has no template for (and one it has, extended:
NX-OS `show interface status`, see NXOS_PORTS): Dell OS10
(`show mac address-table`, `show interface status`, `show lldp neighbors`) and SONiC (`show mac`,
`show interfaces status`, `show lldp neighbors`). Same value names as ntc-templates' (MAC_ADDRESS, VLAN_ID,
PORTS, PORT, STATUS, LOCAL_INTERFACE, NEIGHBOR_NAME, NEIGHBOR_INTERFACE, CHASSIS_ID), so `parse.py` reads
both alike.

Written against real output: SONiC's from sonic-utilities (Apache-2.0: doc/Command-Reference.md and the
expected outputs of tests/fdbshow_test.py, tests/intfutil_test.py), Dell OS10's MAC table and LLDP from
the captures in Intel's mfd-switchmanagement tests (MIT) and its interface status from the layout Dell's OS10
Enterprise Edition User Guide documents (not copied: its licence allows no copies); the captures and their
sources are in tests/fixtures/ethernet/README.md. A line inside a table that no rule knows is an
error (the answer is then an unknown format), never skipped.
"""

# ruff: noqa: E501  (a TextFSM rule is one line: the templates keep theirs whole)
from __future__ import annotations

import io

import textfsm

_MAC_COLON = r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}"

DELL_OS10_MACS = rf"""Value VLAN_ID (\d+)
Value MAC_ADDRESS ({_MAC_COLON})
Value TYPE (\S+)
Value PORTS (\S+)

Start
  ^\s*VlanId\s+Mac\s+Address\s+Type\s+Interface\s*$$ -> Table

Table
  ^\s*(?:pv\s+\d+\s+)?${{VLAN_ID}}\s+${{MAC_ADDRESS}}\s+${{TYPE}}\s+${{PORTS}}\s*$$ -> Record
  ^\s*$$
  ^. -> Error
"""

# Port (Eth 1/1/1, Po 10, Vl 1), an optional description, then Status up|down, Speed, Duplex, Mode, Vlan,
# Tagged-Vlans (the last columns blank on some rows)
DELL_OS10_PORTS = r"""Value PORT ((?:Eth|Po|Vl|Mgmt|Lo)\s*\d\S*)
Value NAME (\S.*?)
Value STATUS (up|down|testing|dormant|not-present|lower-layer-down)
Value SPEED (\S+)
Value DUPLEX (\S+)
Value MODE (\S+)
Value VLAN_ID (\S+)
Value TAGGED_VLANS (\S+)

Start
  ^-+\s*$$
  ^Port\s+Description\s+Status\s+Speed\s+Duplex\s+Mode\s+Vlan\s+Tagged-Vlans\s*$$ -> Table

Table
  ^-+\s*$$
  ^${PORT}\s+(?:${NAME}\s+)?${STATUS}\s+${SPEED}(?:\s+${DUPLEX})?(?:\s+${MODE})?(?:\s+${VLAN_ID})?(?:\s+${TAGGED_VLANS})?\s*$$ -> Record
  ^\s*$$
  ^. -> Error
"""

# the system name may hold spaces ('Not Advertised'); port id and chassis id are the last two words
DELL_OS10_LLDP = r"""Value LOCAL_INTERFACE (\S+)
Value NEIGHBOR_NAME (\S.*?)
Value NEIGHBOR_INTERFACE (\S+)
Value CHASSIS_ID (\S+)

Start
  ^\s*Loc\s+PortID\s+Rem\s+Host\s+Name\s+Rem\s+Port\s+Id\s+Rem\s+Chassis\s+Id\s*$$ -> Table

Table
  ^-+\s*$$
  ^${LOCAL_INTERFACE}\s+${NEIGHBOR_NAME}\s+${NEIGHBOR_INTERFACE}\s+${CHASSIS_ID}\s*$$ -> Record
  ^\s*$$
  ^. -> Error
"""

SONIC_MACS = rf"""Value VLAN_ID (\d+)
Value MAC_ADDRESS ({_MAC_COLON})
Value PORTS (\S+)
Value TYPE (\S+)

Start
  ^\s*No\.\s+Vlan\s+MacAddress\s+Port\s+Type\s*$$ -> Table

Table
  ^[-\s]+$$
  ^\s*\d+\s+${{VLAN_ID}}\s+${{MAC_ADDRESS}}\s+${{PORTS}}\s+${{TYPE}}\s*$$ -> Record
  ^Total\s+number\s+of\s+entries\s+\d+\s*$$
  ^\s*$$
  ^. -> Error
"""

# Interface Lanes Speed MTU [FEC] Alias [Vlan] Oper Admin [Type Asym PFC]: the optional columns come and go
# with the release (the Command Reference's example has no FEC/Vlan, today's intfutil prints both)
SONIC_PORTS = r"""Value PORT (\S+)
Value LANES (\S+)
Value SPEED (\S+)
Value MTU (\S+)
Value FEC (\S+)
Value ALIAS (\S+)
Value VLAN_ID (\S+)
Value STATUS (up|down|N/A)
Value ADMIN (up|down|N/A)
Value TYPE (\S.*?)
Value ASYM_PFC (on|off|N/A)

Start
  ^\s*Interface\s+Lanes\s+Speed\s+MTU\s+.*Oper\s+Admin -> Table

Table
  ^[-\s]+$$
  ^\s*${PORT}\s+${LANES}\s+${SPEED}\s+${MTU}\s+(?:${FEC}\s+)?${ALIAS}\s+(?:${VLAN_ID}\s+)?${STATUS}\s+${ADMIN}(?:\s+${TYPE}\s+${ASYM_PFC})?\s*$$ -> Record
  ^\s*$$
  ^. -> Error
"""

# lldpctl's text as `show lldp neighbors` prints it: one block per neighbour between dashed lines
SONIC_LLDP = r"""Value Required LOCAL_INTERFACE (\S+)
Value CHASSIS_ID (\S+)
Value NEIGHBOR_NAME (\S.*?)
Value NEIGHBOR_INTERFACE (\S.*?)
Value PORT_DESCRIPTION (\S.*?)

Start
  ^\s*LLDP\s+neighbors:\s*$$ -> Neighbours

Neighbours
  ^-+\s*$$ -> Record
  ^\s*Interface:\s+${LOCAL_INTERFACE},
  ^\s+ChassisID:\s+\S+\s+${CHASSIS_ID}\s*$$
  ^\s+SysName:\s+${NEIGHBOR_NAME}\s*$$
  ^\s+PortID:\s+\S+\s+${NEIGHBOR_INTERFACE}\s*$$
  ^\s+PortDescr:\s+${PORT_DESCRIPTION}\s*$$
  ^\s+\S
  ^\s*$$
  ^. -> Error
"""

# ntc-templates 9.3's cisco_nxos_show_interface_status.textfsm (Apache-2.0, Network to Code) with the
# error-disabled words added to STATUS: a real NX-OS prints `linkFlapE` there for a port error-disabled by
# link flaps (genieparser's golden capture, tests/fixtures/ethernet/cisco_nxos_show_interface_status_linkflap.raw),
# which ntc-templates' rule set refuses (State Error on the line) and the whole switch would read `unknown`.
NXOS_PORTS = r"""Value PORT (\S+)
Value NAME (.*?)
Value STATUS (connected|notconnec|down|disabled|sfpAbsent|xcvrAbsen|channelDo|noOperMem|linkFlapE|errDisabl|err-disab\S*|suspnd|inactive|sfpInvali)
Value VLAN_ID (\d+|routed|trunk|f-path|--)
Value DUPLEX (\S+)
Value SPEED (\S+)
Value TYPE (\S+(\s\S+)*)

Start
  ^${PORT}\s+${NAME}\s+${STATUS}\s+${VLAN_ID}\s+${DUPLEX}\s+${SPEED}(?:\s+${TYPE})?\s*$$ -> Record
  ^[Pp]ort\s+[Nn]ame\s+[Ss]tatus\s+[Vv]lan\s+[Dd]uplex\s+[Ss]peed\s+[Tt]ype\s*$$
  ^Interface\s+Name\s+Status\s+(Reason\s+){2}description\s*$$
  ^${PORT}\s+${NAME}\s+${STATUS}\s+admin\s+down\s+\S+\s+\S+\s*$$ -> Record
  ^${PORT}\s+${NAME}\s+${STATUS}\s+\S+(\s+\S+)?\s+.*?\s*$$ -> Record
  ^-+
  ^\s*$$
  ^. -> Error
"""

# (platform, command) -> template
TEMPLATES: dict[tuple[str, str], str] = {
    ("cisco_nxos", "show interface status"): NXOS_PORTS,
    ("dell_os10", "show mac address-table"): DELL_OS10_MACS,
    ("dell_os10", "show interface status"): DELL_OS10_PORTS,
    ("dell_os10", "show lldp neighbors"): DELL_OS10_LLDP,
    ("sonic", "show mac"): SONIC_MACS,
    ("sonic", "show interfaces status"): SONIC_PORTS,
    ("sonic", "show lldp neighbors"): SONIC_LLDP,
}


def parse(platform: str, command: str, text: str) -> list[dict[str, object]]:
    """The rows of `text` as dicts keyed by the lower-cased value names (as ntc-templates' parse_output)."""
    fsm = textfsm.TextFSM(io.StringIO(TEMPLATES[(platform, command)]))
    header = [h.lower() for h in fsm.header]
    rows = fsm.ParseText(text)
    # a template whose header line leads out of Start: still in Start at the end, no header matched (not this table)
    if len(fsm.states) > 1 and getattr(fsm, "_cur_state_name", "") == "Start":
        raise textfsm.TextFSMError("the table's header line was not found")
    return [dict(zip(header, row, strict=True)) for row in rows]
