"""Compare a discovered fabric with its design: one finding per fault, each with both ends and a fix.

Every designed link and every discovered link is accounted for once, in this order: links that match
(checked for width and speed: below the design is `degraded`; a width or speed the capture does not give is
`rate_unknown`, never a pass; so is a rate the design does not know, as in a baseline taken from a capture
without it); devices that are missing or unknown (their links go with them); links
that would join the parts of a split fabric (they go with the partition finding); pairs of cables
crossed at one end (one `swapped` finding); a port cabled to the wrong peer (`miswired`); a cable
nobody designed (`unexpected_link`); what is left of the design is a port that is down/polling
(`port_down`) or simply a `missing_link`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from fabric.design import Design, DesignLink, Port
from fabric.findings import KINDS, FEnd, Finding
from fabric.identify import Identification
from fabric.speeds import speed_below, width_below
from fabric.topology import End, Link, NodeType, Topology

MAX_MEMBERS_IN_TEXT = 12


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    summary: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return {"findings": [f.to_dict() for f in self.findings], "summary": self.summary}


class _Ctx:
    def __init__(self, design: Design, top: Topology, ident: Identification) -> None:
        self.design = design
        self.top = top
        self.ident = ident
        self.guid_of = ident.by_name
        self.findings: list[Finding] = []
        self.used_design: set[int] = set()
        self.used_disc: set[tuple[End, End]] = set()
        self.down = {d.end: d for d in top.down_ports}
        self.tier_names = design.tier_names()
        self.claimed_by = {end: conflict.guid for conflict in top.conflicts for end in conflict.claimants}
        self.hidden: dict[str, list[str]] = {}
        self._tier_cache: dict[int, str] = {}

    # ends -------------------------------------------------------------------------------------------
    def dend(self, p: Port) -> FEnd:
        node = self.design.nodes[p.node]
        guid = self.guid_of.get(p.node)
        desc = self.top.nodes[guid].description if guid and guid in self.top.nodes else None
        return FEnd(guid, p.node, p.port, node.location, desc)

    def tend(self, e: End) -> FEnd:
        name = self.ident.name(e.guid)
        node = self.top.nodes.get(e.guid)
        loc = self.design.nodes[name].location if name else None
        return FEnd(e.guid, name, e.port, loc, node.description if node else None)

    def to_design(self, e: End) -> Port | None:
        name = self.ident.name(e.guid)
        return Port(name, e.port) if name else None

    def disc_at(self, p: Port) -> Link | None:
        guid = self.guid_of.get(p.node)
        return None if guid is None else self.top.by_end.get(End(guid, p.port))

    def tier(self, dl: DesignLink) -> str:
        t = self._tier_cache.get(dl.number)
        if t is None:
            t = self._tier_cache[dl.number] = self.tier_names.get(self.design.link_tier(dl), "?")
        return t

    @staticmethod
    def key(link: Link) -> tuple[End, End]:
        return (link.a, link.b)

    def add(self, f: Finding) -> None:
        self.findings.append(f)


def validate(design: Design, top: Topology, ident: Identification) -> Report:
    c = _Ctx(design, top, ident)
    _matched(c)
    _missing_devices(c)
    _duplicate_guids(c)
    _unknown_devices(c)
    parts = _partition(c)
    _swapped(c)
    _miswired_and_unexpected(c)
    _missing_or_down(c)
    order = {k: i for i, k in enumerate(KINDS)}
    findings = sorted(c.findings, key=lambda f: (order[f.kind], _sort_key(f)))
    return Report(tuple(findings), _summary(c, findings, parts))


def _sort_key(f: Finding) -> tuple[object, ...]:
    e = f.where()
    if e is None:
        return ((), "", 0)
    return (e.location.sort_key() if e.location else ((), ), e.name or e.guid or "", e.port or 0)


def _duplicate_guids(c: _Ctx) -> None:
    for conflict in c.top.conflicts:
        node = c.top.nodes.get(conflict.guid)
        hidden = c.hidden.get(conflict.guid, [])
        # What discovery says about a GUID two devices share is unreliable: the finding covers it.
        for end in list(c.top.by_end):
            if end.guid == conflict.guid:
                link = c.top.by_end[end]
                if c.key(link) not in c.used_disc:
                    c.used_disc.add(c.key(link))
                    for e in (link.a, link.b):
                        dp = c.to_design(e)
                        dl = c.design.by_port.get(dp) if dp else None
                        if dl is not None:
                            c.used_design.add(dl.number)
        name = c.ident.name(conflict.guid)
        if name is not None:
            c.used_design.update(dl.number for dl in _design_links_of(c, name))
        c.add(Finding(
            kind="duplicate_guid",
            a=FEnd(conflict.guid, c.ident.name(conflict.guid), None, None, node.description if node else None),
            b=None,
            expected="every device has its own GUID",
            seen="; ".join(conflict.evidence[:4])
                 + (f"; hidden behind it: {', '.join(hidden)}" if hidden else ""),
            fix=f"find the devices that report GUID 0x{conflict.guid} (ibstat on hosts, 'show inventory' on "
                "switches) and have the vendor re-burn one of them; until then discovery of that part is unreliable",
            details={"evidence": list(conflict.evidence), "hidden_devices": hidden},
        ))


def _matched(c: _Ctx) -> None:
    guid_of, by_end, used_design, used_disc = c.guid_of, c.top.by_end, c.used_design, c.used_disc
    for dl in c.design.links:
        ga, gb = guid_of.get(dl.a.node), guid_of.get(dl.b.node)
        if ga is None or gb is None:
            continue
        here = End(ga, dl.a.port)
        disc = by_end.get(here)
        if disc is None:
            continue
        far = disc.b if disc.a == here else disc.a
        if far.guid != gb or far.port != dl.b.port:
            continue
        used_design.add(dl.number)
        used_disc.add((disc.a, disc.b))
        rate = f"{disc.width or '?'} {disc.speed or '?'}"
        unread = [x for x, v in (("width", disc.width), ("speed", disc.speed)) if v is None]
        unknown = [x for x, v in (("width", dl.width), ("speed", dl.speed)) if v is None]
        details: dict[str, object] = {}
        if width_below(disc.width, dl.width) or speed_below(disc.speed, dl.speed):
            kind = "degraded"
            could = f" (the port could run {disc.could_be})" if disc.could_be else ""
            seen = f"trained at {rate}{could}"
            fix = (f"reseat, then replace {f'cable {dl.cable}' if dl.cable else 'the cable'} (and the transceivers) "
                   f"between {dl.a} and {dl.b}; check both ports' configured speed/width")
        elif unread or unknown:
            # A rate the capture does not give, or that the design (a baseline built from a capture without it)
            # does not know, is not a pass: the link stays unverified until both are known.
            kind, details = "rate_unknown", {"unread": unread}
            gaps, fixes = [], []
            if unread:
                gaps.append(f"the capture gives no {' and '.join(unread)}")
                fixes.append(f"read the rate of {dl.a} and {dl.b} (iblinkinfo, or ibnetdiscover from a host on the "
                             "fabric; UFM's links JSON may carry a width without a speed) and validate again")
            if unknown:
                details["expected_unknown"] = unknown
                gaps.append(f"{c.design.source} gives no expected {' and '.join(unknown)} to check {rate} against")
                fixes.append("take the baseline from a capture that has every link's width and speed (iblinkinfo, "
                             "or ibnetdiscover from a host on the fabric), or validate against the cabling design")
            seen = f"cabled as designed; {'; '.join(gaps)}" + ("" if unknown else f" ({rate})")
            fix = "; ".join(fixes)
        else:
            continue
        c.add(Finding(kind=kind, a=c.dend(dl.a), b=c.dend(dl.b), expected=dl.rate(), seen=seen,
                      fix=fix, tier=c.tier(dl), cable=dl.cable, details=details))


def _design_links_of(c: _Ctx, name: str) -> list[DesignLink]:
    node = c.design.nodes[name]
    out = []
    for port in range(1, node.ports + 1):
        dl = c.design.by_port.get(Port(name, port))
        if dl is not None:
            out.append(dl)
    return out


def _missing_devices(c: _Ctx) -> None:
    for name, node in c.design.nodes.items():
        if name in c.guid_of:
            continue
        links = _design_links_of(c, name)
        for dl in links:
            c.used_design.add(dl.number)
        if node.type is not NodeType.SWITCH and len(links) == 1 and (
            _down_hca_port(c, name, links[0]) or _hidden_by_duplicate(c, name, links[0])
        ):
            continue
        kind = "switch" if node.type is NodeType.SWITCH else "HCA"
        peers = [str(dl.other(Port(name, dl.a.port if dl.a.node == name else dl.b.port))) for dl in links]
        if node.type is NodeType.SWITCH:
            fix = (f"check that switch {name} is installed, powered and cabled; if it is, it could not be "
                   "placed: see the identification report")
        else:
            fix = (f"check host {node.host}: HCA {node.hca} present and up (ibstat), its cable to "
                   f"{peers[0] if peers else 'its leaf'} seated")
        c.add(Finding(
            kind="missing_device",
            a=FEnd(None, name, None, node.location, None), b=None,
            expected=f"{kind} {name} with {len(links)} link(s)",
            seen="not discovered",
            fix=fix,
            tier=c.tier_names.get(max(node.tier, 1)),
            details={"design_links": peers[:64], "design_link_count": len(links)},
        ))


def _leaf_end(c: _Ctx, name: str, dl: DesignLink) -> tuple[Port, End | None]:
    """The designed peer port of a single-link HCA, and that port as discovered (None if its switch is not)."""
    leaf_port = dl.other(Port(name, dl.a.port if dl.a.node == name else dl.b.port))
    guid = c.guid_of.get(leaf_port.node)
    return leaf_port, (End(guid, leaf_port.port) if guid else None)


def _hidden_by_duplicate(c: _Ctx, name: str, dl: DesignLink) -> bool:
    """An HCA that is not discovered because it shares its GUID with another: its leaf port claims that GUID."""
    leaf_port, end = _leaf_end(c, name, dl)
    dup = c.claimed_by.get(end) if end else None
    if dup is None:
        return False
    c.hidden.setdefault(dup, []).append(f"{name} (cabled to {leaf_port})")
    return True


def _down_hca_port(c: _Ctx, name: str, dl: DesignLink) -> bool:
    """An HCA that is not discovered while its leaf port is polling: the link is down, say so."""
    leaf_port, end = _leaf_end(c, name, dl)
    down = c.down.get(end) if end else None
    if down is None:
        return False
    c.add(Finding(
        kind="port_down", a=c.dend(leaf_port), b=c.dend(Port(name, 1)),
        expected=f"link up, {dl.rate()}",
        seen=f"{leaf_port} is {down.state} and {name} is not discovered",
        fix=f"check the cable {dl.cable or ''} from {c.dend(leaf_port).where()} to {name} and that the HCA is up "
            "(ibstat on the host); reseat, then replace cable/transceiver",
        tier=c.tier(dl), cable=dl.cable,
    ))
    return True


def _unknown_devices(c: _Ctx) -> None:
    ignored = set(c.ident.ignored)
    reasons = {u.guid: u.reason for u in c.ident.unplaced}
    if ignored:
        for guid in ignored:
            for port, _far in c.top.adjacency.get(guid, ()):
                link = c.top.by_end[End(guid, port)]
                c.used_disc.add(c.key(link))  # the SHARP engine's internal port, never cabled
    for guid, node in c.top.nodes.items():
        if guid in c.ident.by_guid or guid in ignored:
            continue
        links = [c.top.by_end[End(guid, port)] for port, _far in c.top.adjacency.get(guid, ())]
        attached: list[str] = []
        first_peer: FEnd | None = None
        for link in links:
            c.used_disc.add(c.key(link))
            here = link.a if link.a.guid == guid else link.b
            peer = link.other(here)
            dp = c.to_design(peer)
            if dp is not None:
                attached.append(str(dp))
                if first_peer is None:
                    first_peer = c.tend(peer)
                dl = c.design.by_port.get(dp)
                if dl is not None:
                    c.used_design.add(dl.number)
        what = "switch" if node.type is NodeType.SWITCH else "HCA"
        c.add(Finding(
            kind="unknown_device", at="b",
            a=FEnd(guid, None, None, None, node.description), b=first_peer,
            expected="only designed devices",
            seen=f"{what} GUID 0x{guid} \"{node.description}\" with {len(links)} link(s)"
                 + (f", cabled to {', '.join(attached[:4])}" if attached else ""),
            fix=(f"identify this {what}: if it belongs, add it to the design (or set its node description to its "
                 "design name); otherwise unplug it. Not placed because "
                 f"{reasons.get(guid, 'it is not in the design')}"),
            details={"links": [str(x) for x in attached[:64]], "reason": reasons.get(guid)},
        ))


def _partition(c: _Ctx) -> list[set[str]]:
    parts = c.top.components()
    if len(parts) < 2:
        return parts
    comp = {g: i for i, part in enumerate(parts) for g in part}
    joining: list[DesignLink] = []
    for dl in c.design.links:
        if dl.number in c.used_design:
            continue
        ga, gb = c.guid_of.get(dl.a.node), c.guid_of.get(dl.b.node)
        if ga is None or gb is None or comp.get(ga) == comp.get(gb):
            continue
        if c.disc_at(dl.a) is not None or c.disc_at(dl.b) is not None:
            continue  # a port cabled elsewhere is a miswire, not a missing bridge
        joining.append(dl)
        c.used_design.add(dl.number)
    described = []
    for i, part in enumerate(parts):
        switches = sorted(c.ident.name(g) or f"0x{g}" for g in part if c.top.nodes[g].type is NodeType.SWITCH)
        hosts = sorted({(c.design.nodes[n].host or n) for g in part if (n := c.ident.name(g))
                        and c.design.nodes[n].type is not NodeType.SWITCH})
        described.append({"part": i + 1, "size": len(part), "switches": switches, "hosts": hosts,
                          "cas": sum(1 for g in part if c.top.nodes[g].type is not NodeType.SWITCH)})
    sizes = ", ".join(str(d["size"]) for d in described)
    sample = "; ".join(f"{dl.a} <-> {dl.b}" for dl in joining[:3])
    c.add(Finding(
        kind="partition",
        a=None, b=None,
        expected="one connected fabric",
        seen=f"{len(parts)} disconnected parts of {sizes} nodes"
             + (f"; {len(joining)} designed links that would join them are not cabled" if joining else ""),
        fix=("cable the designed links between the parts" + (f" (e.g. {sample})" if sample else "")
             + "; UFM/OpenSM on one part cannot see the others"),
        details={"parts": described, "joining_links": [
            {"a": str(dl.a), "b": str(dl.b), "cable": dl.cable} for dl in joining]},
    ))
    return parts


def _swapped(c: _Ctx) -> None:
    for link in c.top.links:
        if c.key(link) in c.used_disc:
            continue
        u, v = c.to_design(link.a), c.to_design(link.b)
        if u is None or v is None:
            continue
        lu, lv = c.design.by_port.get(u), c.design.by_port.get(v)
        if lu is None or lv is None or lu.number == lv.number or {lu.number, lv.number} & c.used_design:
            continue
        u2, v2 = lu.other(u), lv.other(v)
        other = c.disc_at(u2)
        if other is None or c.key(other) in c.used_disc:
            continue
        g_v2 = c.guid_of.get(v2.node)
        g_u2 = c.guid_of.get(u2.node)
        if g_v2 is None or g_u2 is None or other.other(End(g_u2, u2.port)) != End(g_v2, v2.port):
            continue
        # Design u-u2, v-v2; cabled u-v, u2-v2. Exchanging the plugs in (v, u2) or in (u, v2) fixes both.
        options = [(v, u2), (u, v2)]
        options.sort(key=lambda pq: (pq[0].node != pq[1].node,
                                     c.design.nodes[pq[0].node].type is not NodeType.SWITCH,
                                     c.design.nodes[pq[1].node].type is not NodeType.SWITCH))
        p, q = options[0]
        c.used_design.update((lu.number, lv.number))
        c.used_disc.update((c.key(link), c.key(other)))
        cables = [x for x in (lu.cable, lv.cable) if x]
        c.add(Finding(
            kind="swapped",
            a=c.dend(p), b=c.dend(q),
            expected=f"{lu.a} <-> {lu.b} and {lv.a} <-> {lv.b}",
            seen=f"{u} <-> {v} and {u2} <-> {v2}",
            fix=f"swap the two cables plugged into {c.dend(p).where()} and {c.dend(q).where()}"
                + (f" (cables {' and '.join(cables)})" if cables else ""),
            tier=c.tier(lu), cable=" ".join(cables) or None,
            details={"design_links": [f"{lu.a} <-> {lu.b}", f"{lv.a} <-> {lv.b}"],
                     "cabled": [f"{u} <-> {v}", f"{u2} <-> {v2}"]},
        ))


def _miswired_and_unexpected(c: _Ctx) -> None:
    for link in c.top.links:
        if c.key(link) in c.used_disc:
            continue
        c.used_disc.add(c.key(link))
        u, v = c.to_design(link.a), c.to_design(link.b)
        lu = c.design.by_port.get(u) if u else None
        lv = c.design.by_port.get(v) if v else None
        a, b = c.tend(link.a), c.tend(link.b)
        seen = f"{a.label()} <-> {b.label()}"
        if lu is None and lv is None:
            c.add(Finding(
                kind="unexpected_link", a=a, b=b,
                expected="nothing cabled at either port",
                seen=seen + (f" at {link.width} {link.speed}" if link.width else ""),
                fix=f"remove the cable between {a.where()} and {b.where()} (not in the design)",
                tier=_tier_of_ports(c, u, v),
            ))
            continue
        anchor, anchor_dl, other_end, other_dl = (u, lu, v, lv) if lu is not None else (v, lv, u, lu)
        assert anchor is not None and anchor_dl is not None
        should = anchor_dl.other(anchor)
        for dl in (lu, lv):
            if dl is not None:
                c.used_design.add(dl.number)
        other_label = (str(other_end) if other_end else (b if anchor == u else a).label())
        fix = f"move the plug now in {other_label} to {c.dend(should).where()}"
        expected = f"{anchor} <-> {should}" + (f" (cable {anchor_dl.cable})" if anchor_dl.cable else "")
        if other_dl is not None and other_end is not None:
            expected += f"; {other_end} <-> {other_dl.other(other_end)}"
            fix += f"; {other_end} belongs to {other_dl.other(other_end)}"
        c.add(Finding(
            kind="miswired", a=c.dend(anchor), b=b if anchor == u else a,
            expected=expected, seen=seen, fix=fix, tier=c.tier(anchor_dl), cable=anchor_dl.cable, at="b",
        ))


def _tier_of_ports(c: _Ctx, u: Port | None, v: Port | None) -> str | None:
    tiers = [c.design.nodes[p.node].tier for p in (u, v) if p is not None]
    return c.tier_names.get(max(max(tiers, default=1), 1)) if tiers else None


def _missing_or_down(c: _Ctx) -> None:
    for dl in c.design.links:
        if dl.number in c.used_design:
            continue
        c.used_design.add(dl.number)
        ends = [(p, c.guid_of.get(p.node)) for p in (dl.a, dl.b)]
        downs = [(p, c.down[End(g, p.port)]) for p, g in ends if g and End(g, p.port) in c.down]
        busy = [(p, lk) for p, _ in ends if (lk := c.disc_at(p)) is not None]
        cable = f"cable {dl.cable}" if dl.cable else "the cable"
        if downs:
            p, d = downs[0]
            c.add(Finding(
                kind="port_down", a=c.dend(dl.a), b=c.dend(dl.b),
                expected=f"link up, {dl.rate()}",
                seen=f"{p} is {d.state}" + (f", {downs[1][0]} is {downs[1][1].state}" if len(downs) > 1 else ""),
                fix=f"reseat {cable} at both ends; if still {d.state.split('/')[-1]}, replace the cable/transceiver "
                    f"(port {p} sees no peer)",
                tier=c.tier(dl), cable=dl.cable,
            ))
            continue
        note = "" if not busy else f" ({busy[0][0]} is cabled elsewhere)"
        c.add(Finding(
            kind="missing_link", a=c.dend(dl.a), b=c.dend(dl.b),
            expected=f"{dl.a} <-> {dl.b}" + (f" ({cable})" if dl.cable else ""),
            seen="no link at either port" + note,
            fix=f"connect {cable} from {c.dend(dl.a).where()} to {c.dend(dl.b).where()}",
            tier=c.tier(dl), cable=dl.cable,
        ))


def _summary(c: _Ctx, findings: Iterable[Finding], parts: list[set[str]]) -> dict[str, object]:
    findings = list(findings)
    kinds = Counter(f.kind for f in findings)
    tiers: dict[str, dict[str, object]] = {}
    by_tier = Counter((f.tier, f.kind) for f in findings)
    tier_of = {n.name: n.tier for n in c.design.nodes.values()}
    designed = Counter(c.tier_names.get(max(tier_of[dl.a.node], tier_of[dl.b.node]), "?") for dl in c.design.links)
    for name in c.tier_names.values():
        tiers[name] = {
            "designed_links": designed.get(name, 0),
            "findings": {k: n for (t, k), n in by_tier.items() if t == name},
        }
    switches = [n for n in c.top.nodes.values() if n.type is NodeType.SWITCH]
    placed_switches = sum(1 for g, p in c.ident.by_guid.items()
                          if c.design.nodes[p.name].type is NodeType.SWITCH and g in c.top.nodes)
    return {
        "design": c.design.name,
        "discovered_from": c.top.source,
        "clean": not findings,
        "findings": {k: kinds.get(k, 0) for k in KINDS},
        "total_findings": len(findings),
        "switches": {"designed": len(c.design.switches()), "discovered": len(switches), "placed": placed_switches},
        "cas": {"designed": len(c.design.cas()),
                "discovered": len(c.top.nodes) - len(switches) - len(c.ident.ignored),
                "placed": len(c.ident.by_guid) - placed_switches},
        "links": {"designed": len(c.design.links), "discovered": len(c.top.links)},
        "tiers": tiers,
        "parts": len(parts),
        "unplaced": len(c.ident.unplaced),
        "ignored_aggregation_nodes": len(c.ident.ignored),
        "warnings": list(c.top.warnings[:50]),
        "warning_count": len(c.top.warnings),
        "identification_notes": list(c.ident.notes[:50]),
        "unplaced_nodes": [{"guid": f"0x{u.guid}", "type": str(u.type), "description": u.description,
                            "reason": u.reason} for u in c.ident.unplaced[:100]],
    }
