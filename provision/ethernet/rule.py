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
    from provision.ethernet.design import EthernetDesign, HostNics, NicPlacement
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


def _tors(design: EthernetDesign, rule: DesignRule, racks: set[str], problems: list[str]) -> dict[str, str]:
    """rack -> its top-of-rack switch: the rule's `racks` first, else the one switch located in the rack."""
    located: dict[str, list[str]] = {}
    for name, spec in sorted(design.switches.items()):
        if spec.location:
            located.setdefault(spec.location, []).append(name)
    tors = {}
    for rack in sorted(racks):
        if rack in rule.racks:
            tors[rack] = rule.racks[rack]
        elif len(located.get(rack, [])) == 1:
            tors[rack] = located[rack][0]
        elif located.get(rack):
            problems.append(f"rack {rack}: switches {', '.join(located[rack])} are all located there: "
                            "name its top-of-rack switch in rule.racks")
    for rack, switch in sorted(rule.racks.items()):
        if rack not in racks:
            problems.append(f"rule.racks: unknown rack {rack!r} (not in the site)")
        if switch not in design.switches:
            problems.append(f"rule.racks: rack {rack} -> undeclared switch {switch!r}")
    return tors


def _place(design: EthernetDesign, rule: DesignRule, pos: Position, role: str, switch: str,
           problems: list[str]) -> NicPlacement | None:
    from provision.ethernet.design import NicPlacement

    role_rule: RoleRule = getattr(rule, role)
    spec = design.switches[switch]
    platform = rule.platforms.get(spec.platform, PlatformRule())
    n = pos.u + role_rule.offset + platform.offset
    if not 1 <= n <= spec.ports:
        problems.append(f"{pos.host} {role}: U{pos.u} gives port {n} on {switch}, out of range 1..{spec.ports}")
        return None
    return NicPlacement(switch=switch, port=port_name(spec.platform, n, platform), vlan=role_rule.vlan)


def port_name(platform: str, n: int, rule: PlatformRule | None = None) -> str:
    """The name switch `platform` gives its port number n (1-based): Eth1/5, Et5, ethernet1/1/5, Ethernet4."""
    rule = rule or PlatformRule()
    start = rule.start if rule.start is not None else DEFAULT_START.get(platform, 1)
    return f"{rule.prefix or DEFAULT_PREFIX[platform]}{start + (n - 1) * rule.step}"


def _expand_host(design: EthernetDesign, rule: DesignRule, pos: Position, tors: dict[str, str],
                 problems: list[str]) -> HostNics | None:
    from provision.ethernet.design import HostNics

    explicit = design.nics.get(pos.host, HostNics())
    placed = {"bmc": explicit.bmc, "pxe": explicit.pxe}
    for role in ("bmc", "pxe"):
        if placed[role] is not None or getattr(rule, role) is None:
            continue
        switch = tors.get(pos.rack)
        if switch is None:
            problems.append(f"{pos.host} {role}: rack {pos.rack} has no top-of-rack switch "
                            "(no switch located there, none in rule.racks)")
        elif switch in design.switches:
            placed[role] = _place(design, rule, pos, role, switch, problems)
    if placed["bmc"] is None and placed["pxe"] is None:
        return None
    return HostNics(bmc=placed["bmc"], pxe=placed["pxe"])


def expand(design: EthernetDesign, positions: list[Position]) -> tuple[EthernetDesign, list[str]]:
    """(the design with the rule's placements added, every problem found)."""
    rule = design.rule
    if rule is None:
        return design, []
    problems: list[str] = []
    tors = _tors(design, rule, {p.rack for p in positions}, problems)
    nics = dict(design.nics)
    for pos in sorted(positions, key=lambda p: p.host):
        if rule.roles and pos.role not in rule.roles:
            continue
        host = _expand_host(design, rule, pos, tors, problems)
        if host is not None:
            nics[pos.host] = host
    return design.model_copy(update={"nics": nics, "rule": None}), problems
