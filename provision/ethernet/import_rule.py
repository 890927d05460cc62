"""`provision ethernet import --rule`: write the design as the rule "rack's top-of-rack switch, port = U
position" (provision/ethernet/rule.py) when the sheet follows it, rather than one entry per host.

The rule is fitted from the rows: per role, the offset (port number minus the host's U) and the VLAN that
most rows share, on the switch located in the host's rack. It is then expanded over the site's racks and
compared with every row, so it can never say something the sheet does not:

    auto    (default) the rule form when every row is exactly what the rule gives, no row carries a MAC
            (the rule has no place for one) and the rule places no host the sheet leaves out; else rows
    always  the rule, plus an explicit entry for each host the rule does not reproduce (explicit entries win
            at load) or whose row carries a MAC
    never   one entry per host, as the sheet says
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from provision.ethernet.design import EthernetDesign, HostNics, NicPlacement, expand_rule, normalise_port
from provision.ethernet.rule import DesignRule, Position, RoleRule, port_name

MODES = ("auto", "always", "never")
ROLES = ("bmc", "pxe")


@dataclass(frozen=True)
class RuleFit:
    design: EthernetDesign  # what to write
    rule_form: bool  # True when `design` carries the rule
    why: str  # why the rule form was (not) written


def _number(platform: str, port: str, ports: int) -> int | None:
    """The port's number (1-based) as the rule names ports on this platform, or None."""
    key = normalise_port(port)
    return next((n for n in range(1, ports + 1) if normalise_port(port_name(platform, n)) == key), None)


def _located(design: EthernetDesign) -> dict[str, str]:
    """rack -> the one switch located in it (racks with two are left out: the rule needs rule.racks there)."""
    racks = Counter(s.location for s in design.switches.values() if s.location)
    return {s.location: name for name, s in sorted(design.switches.items()) if s.location and racks[s.location] == 1}


def _role_rule(design: EthernetDesign, by_host: dict[str, Position], role: str) -> RoleRule | None:
    """The offset and VLAN most of this role's rows share on their rack's switch (None: no row fits)."""
    tors = _located(design)
    fits: Counter[tuple[int, int | None]] = Counter()
    for host, nics in design.nics.items():
        p: NicPlacement | None = getattr(nics, role)
        pos = by_host.get(host)
        if p is None or pos is None or tors.get(pos.rack) != p.switch:
            continue
        spec = design.switches[p.switch]
        n = _number(spec.platform, p.port, spec.ports)
        if n is not None and n >= pos.u:
            fits[(n - pos.u, p.vlan)] += 1
    if not fits:
        return None
    (offset, vlan), _ = fits.most_common(1)[0]
    return RoleRule(offset=offset, vlan=vlan)


def _same(a: NicPlacement | None, b: NicPlacement | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.switch, normalise_port(a.port), a.vlan) == (b.switch, normalise_port(b.port), b.vlan)


def _has_mac(n: HostNics) -> bool:
    return any(p is not None and p.mac for p in (n.bmc, n.pxe))


def _reproduced(n: HostNics, by_rule: HostNics | None) -> bool:
    rule = by_rule or HostNics()
    return _same(n.bmc, rule.bmc) and _same(n.pxe, rule.pxe)


def fit_rule(design: EthernetDesign, positions: list[Position], mode: str = "auto") -> RuleFit:
    """The design to write for `mode` (MODES), from the sheet's per-host `design` and the site's positions."""
    if mode == "never":
        return RuleFit(design, False, "--rule never")
    by_host = {p.host: p for p in positions}
    roles = {r: _role_rule(design, by_host, r) for r in ROLES}
    if all(v is None for v in roles.values()):
        return RuleFit(design, False, "no row is on its rack's top-of-rack switch at a port its U gives")
    host_roles = sorted({by_host[h].role for h in design.nics if h in by_host})
    rule = DesignRule(bmc=roles["bmc"], pxe=roles["pxe"], roles=host_roles)
    bare = design.model_copy(update={"nics": {}, "rule": rule})
    expanded, problems = expand_rule(bare, [p for p in positions if p.role in host_roles])
    keep = {h: n for h, n in design.nics.items() if _has_mac(n) or not _reproduced(n, expanded.nics.get(h))}
    extra = sorted(set(expanded.nics) - set(design.nics))
    if mode == "auto" and (keep or extra or problems):
        why = (f"{len(keep)} row(s) not what the rule gives or carrying a MAC (e.g. {sorted(keep)[0]})" if keep else
               f"the rule would also place {len(extra)} host(s) the sheet leaves out (e.g. {extra[0]})" if extra else
               problems[0])
        return RuleFit(design, False, f"rows kept: {why}")
    return RuleFit(bare.model_copy(update={"nics": keep}), True,
                   f"rule form: {len(design.nics) - len(keep)} host(s) by the rule, {len(keep)} explicit")
