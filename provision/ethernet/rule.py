"""The Ethernet design's rule: "a host's rack's top-of-rack switch, port = its U position", expanded into
explicit placements when the design is loaded with the site's racks.

    rule:
      bmc: {offset: 0, vlan: 10}          # BMC NIC on port U (+ offset)
      pxe: {offset: 24, vlan: 20}         # PXE NIC on port U + 24
      platforms:                          # optional, per switch platform: the port's name and an extra offset
        cisco_nxos: {prefix: "Eth1/"}     # default prefixes: cisco_nxos Eth1/, arista_eos Et,
        arista_eos: {prefix: "Et", offset: 0}   # dell_os10 ethernet1/1/, sonic Ethernet (numbered from 0)
        sonic: {start: 0, step: 4}        # the number of port 1, and between ports (SONiC's lanes: 4 on 100G)
      racks: {r1: tor-r1}                 # optional rack -> switch; default: the switch whose location is the rack
      roles: [gpu]                        # optional: the host roles it places (default every host)

A host's explicit `nics` entry wins for the role it names; the rule places only the roles left. Every
placement the rule cannot make is reported (never dropped): a rack without a top-of-rack switch (or two
switches claiming it), a rule naming a rack the site lacks or a switch the design lacks, a port beyond
the switch's `ports`; and after expansion, two NICs on one port (explicit or not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from provision.site import Site

DEFAULT_PREFIX = {"cisco_nxos": "Eth1/", "arista_eos": "Et", "dell_os10": "ethernet1/1/", "sonic": "Ethernet"}
DEFAULT_START = {"sonic": 0}  # SONiC names its first port Ethernet0
MAX_REPORTED = 20


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleRule(_Model):
    offset: int = Field(default=0, ge=0, le=1000)
    vlan: int | None = Field(default=None, ge=1, le=4094)


class PlatformRule(_Model):
    prefix: str | None = Field(default=None, min_length=1, max_length=40)
    offset: int = Field(default=0, ge=0, le=1000)
    start: int | None = Field(default=None, ge=0, le=1000)  # the number in port 1's name (default 1; sonic 0)
    step: int = Field(default=1, ge=1, le=16)


class DesignRule(_Model):
    bmc: RoleRule | None = None
    pxe: RoleRule | None = None
    platforms: dict[Literal["cisco_nxos", "arista_eos", "dell_os10", "sonic"], PlatformRule] = Field(
        default_factory=dict)
    racks: dict[str, str] = Field(default_factory=dict)
    roles: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Position:
    host: str
    rack: str
    u: int
    role: str  # the host's role in the site (gpu, storage, ...)


def site_positions(site: Site) -> list[Position]:
    """Every host of the site with its rack and U position."""
    return [Position(h.hostname, rack.name, h.u, h.role) for rack in site.spec.racks for h in rack.hosts]


def port_name(platform: str, n: int, rule: PlatformRule | None = None) -> str:
    """The name switch `platform` gives its port number n (1-based): Eth1/5, Et5, ethernet1/1/5, Ethernet4."""
    rule = rule or PlatformRule()
    start = rule.start if rule.start is not None else DEFAULT_START.get(platform, 1)
    return f"{rule.prefix or DEFAULT_PREFIX[platform]}{start + (n - 1) * rule.step}"
