"""A simulated switch as the simulator serves it: its ports, their MACs and LLDP neighbours, its fault."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimPort:
    name: str
    status: str = "connected"  # the NOS's own word: connected, notconnect, err-disabled / errdisabled, disabled
    vlan: int = 1
    macs: list[tuple[str, int]] = field(default_factory=list)  # (mac aa:bb:..., vlan)
    lldp: list[tuple[str, str, str]] = field(default_factory=list)  # (system name, port id, chassis mac)


@dataclass
class SimSwitch:
    name: str
    platform: str  # cisco_nxos | arista_eos | dell_os10 | sonic
    address: str
    port: int
    ports: list[SimPort]
    fault: str = ""  # refuse_login | hang | page | unknown_format | lldp_disabled | falls_behind
