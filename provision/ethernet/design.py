"""The Ethernet design: management switches and where each host's BMC and PXE NIC is cabled.

File (YAML), next to the site file or given with --design. The switches are the site's (`switches:` of the
site file, provision/site/switches.py); this file names them and holds the per-host cabling:

    nics:
      gpu-r1-01:
        bmc: {switch: tor-r1, port: Eth1/1, mac: "02:00:00:00:01:01", vlan: 10}
        pxe: {switch: tor-r1, port: Eth1/25, mac: "02:00:00:00:02:01", vlan: 20}

`credential` names an entry of the site's `credentials` (user name and a reference to the password in
the environment or a vault): the password is never in this file, argv, logs, state or output.
A design may still declare `switches:` itself (same fields; a design used without a site, or an older
one): the check reads the site's and the design's together, and a switch declared in both is refused
(one place says where a switch is and how to log in). A NIC's `mac` is optional: the MACs harvested from
the BMCs (host facts) take precedence.
A switch's `ports` (default 48) bounds the ports the design may name. Instead of (or besides) explicit
`nics`, a `rule:` places every host on its rack's top-of-rack switch at port = its U position
(provision/ethernet/rule.py; expanded when the design is loaded with the site, explicit entries winning).
Two NICs designed on one port are refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from provision.errors import BringupError
from provision.ethernet.rule import MAX_REPORTED, DesignRule, PlatformRule, Position, RoleRule, port_name
from provision.site.bounded import InputRefused, load_yaml, read_text
from provision.site.switches import ManagementSwitch
from provision.state.identifiers import canonical_mac

MAX_DESIGN_BYTES = 8 * 1024 * 1024


class EthernetDesignError(BringupError):
    """The Ethernet design file cannot be used."""


def normalise_port(text: str) -> str:
    """A switch port as compared: Ethernet1/26, Eth1/26 and Et1/26 are all eth1/26."""
    t = text.strip().lower()
    return re.sub(r"^(ethernet|eth|et)\s*", "eth", t)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


SwitchSpec = ManagementSwitch  # the site's switch model: one definition wherever a switch is declared


class NicPlacement(_Model):
    switch: str = Field(min_length=1)
    port: str = Field(min_length=1)
    mac: str | None = None
    vlan: int | None = Field(default=None, ge=1, le=4094)

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        if v is None:
            return None
        mac = canonical_mac(v)
        if mac is None:
            raise ValueError(f"{v!r} is not a MAC address")
        return mac


class HostNics(_Model):
    bmc: NicPlacement | None = None
    pxe: NicPlacement | None = None


class EthernetDesign(_Model):
    switches: dict[str, SwitchSpec] = Field(default_factory=dict)
    nics: dict[str, HostNics] = Field(default_factory=dict)
    rule: DesignRule | None = None

    def placements(self) -> list[tuple[str, str, NicPlacement]]:
        """(host, role, placement) for every designed NIC, hosts in order."""
        out = []
        for host in sorted(self.nics):
            for role in ("bmc", "pxe"):
                p = getattr(self.nics[host], role)
                if p is not None:
                    out.append((host, role, p))
        return out


def design_problems(design: EthernetDesign) -> list[str]:
    """NICs on undeclared switches, and ports two NICs are designed on."""
    out = sorted({f"{h} {role} -> {p.switch}: undeclared switch" for h, role, p in design.placements()
                  if p.switch not in design.switches})
    on: dict[tuple[str, str], list[str]] = {}
    for h, role, p in design.placements():
        on.setdefault((p.switch, normalise_port(p.port)), []).append(f"{h} {role}")
    out += [f"{sw} {port}: two hosts on one port ({', '.join(nics)})" for (sw, port), nics in sorted(on.items())
            if len(nics) > 1]
    return out


# The rule's expansion (provision/ethernet/rule.py holds the rule itself).

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
    role_rule: RoleRule = getattr(rule, role)
    spec = design.switches[switch]
    platform = rule.platforms.get(spec.platform, PlatformRule())
    n = pos.u + role_rule.offset + platform.offset
    if not 1 <= n <= spec.ports:
        problems.append(f"{pos.host} {role}: U{pos.u} gives port {n} on {switch}, out of range 1..{spec.ports}")
        return None
    return NicPlacement(switch=switch, port=port_name(spec.platform, n, platform), vlan=role_rule.vlan)


def _expand_host(design: EthernetDesign, rule: DesignRule, pos: Position, tors: dict[str, str],
                 problems: list[str]) -> HostNics | None:
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


def expand_rule(design: EthernetDesign, positions: list[Position]) -> tuple[EthernetDesign, list[str]]:
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


def parse_design(text: str, source: str, positions: list[Position] | None = None,
                 site_switches: dict[str, SwitchSpec] | None = None) -> EthernetDesign:
    """The design; with the site's `positions` (rule.site_positions) its rule is expanded into placements,
    with `site_switches` (the site's `switches:`) its switches are the site's and its own together.
    A design with a rule loaded without positions is refused (its placements would be missing)."""
    try:
        data = load_yaml(text)
        design = EthernetDesign.model_validate(data)
    except (InputRefused, ValidationError, ValueError) as e:
        raise EthernetDesignError(f"{source}: {e}") from None
    if site_switches:
        twice = sorted(set(site_switches) & set(design.switches))
        if twice:
            raise EthernetDesignError(f"{source}: switch(es) {', '.join(twice)} declared both in the site and here: "
                                      "keep them in the site's switches only")
        design = design.model_copy(update={"switches": {**site_switches, **design.switches}})
    if design.rule is not None and positions is None:
        raise EthernetDesignError(f"{source}: its rule needs the site's racks (load it with the site)")
    design, problems = expand_rule(design, positions or [])
    problems += design_problems(design)
    if problems:
        more = f" (and {len(problems) - MAX_REPORTED} more)" if len(problems) > MAX_REPORTED else ""
        raise EthernetDesignError(f"{source}: " + "; ".join(problems[:MAX_REPORTED]) + more)
    return design


def load_design(path: Path, positions: list[Position] | None = None,
                site_switches: dict[str, SwitchSpec] | None = None) -> EthernetDesign:
    try:
        text = read_text(path, limit=MAX_DESIGN_BYTES, what="Ethernet design")
    except InputRefused as e:
        raise EthernetDesignError(str(e)) from None
    except OSError as e:
        raise EthernetDesignError(f"{path}: {e.strerror or e} (write the Ethernet design or give --design)") from None
    return parse_design(text, str(path), positions, site_switches)
