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

from dataclasses import dataclass

from fabric.check_context import CheckContext
from fabric.design import Design, DesignLink, Port
from fabric.findings import KINDS, FEnd, Finding
from fabric.identify import Identification
from fabric.speeds import speed_below, width_below
from fabric.topology import End, NodeType, Topology
from fabric.validation_summary import summarize
from fabric.wiring_checks import miswired_and_unexpected, partition, swapped


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    summary: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return {"findings": [f.to_dict() for f in self.findings], "summary": self.summary}


def validate(design: Design, top: Topology, ident: Identification) -> Report:
    c = CheckContext(design, top, ident)
    _matched(c)
    _missing_devices(c)
    _duplicate_guids(c)
    _unknown_devices(c)
    parts = partition(c)
    swapped(c)
    miswired_and_unexpected(c)
    _missing_or_down(c)
    order = {k: i for i, k in enumerate(KINDS)}
    findings = sorted(c.findings, key=lambda f: (order[f.kind], _sort_key(f)))
    return Report(tuple(findings), summarize(c, findings, parts))


def _sort_key(f: Finding) -> tuple[object, ...]:
    e = f.where()
    if e is None:
        return ((), "", 0)
    return (e.location.sort_key() if e.location else ((), ), e.name or e.guid or "", e.port or 0)


def _duplicate_guids(c: CheckContext) -> None:
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


def _matched(c: CheckContext) -> None:
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


def _design_links_of(c: CheckContext, name: str) -> list[DesignLink]:
    node = c.design.nodes[name]
    out = []
    for port in range(1, node.ports + 1):
        dl = c.design.by_port.get(Port(name, port))
        if dl is not None:
            out.append(dl)
    return out


def _missing_devices(c: CheckContext) -> None:
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
        # The GUID the design (or the baseline it came from) knows: operators search UFM and ibnetdiscover by it.
        search = f"; search UFM and ibnetdiscover for GUID 0x{node.guid}" if node.guid else ""
        if node.type is NodeType.SWITCH:
            fix = (f"check that switch {name} is installed, powered and cabled; if it is, it could not be "
                   f"placed: see the identification report{search}")
        else:
            fix = (f"check host {node.host}: HCA {node.hca} present and up (ibstat), its cable to "
                   f"{peers[0] if peers else 'its leaf'} seated{search}")
        c.add(Finding(
            kind="missing_device",
            a=FEnd(node.guid, name, None, node.location, None), b=None,
            expected=f"{kind} {name} with {len(links)} link(s)",
            seen="not discovered",
            fix=fix,
            tier=c.tier_names.get(max(node.tier, 1)),
            details={"design_links": peers[:64], "design_link_count": len(links)},
        ))


def _leaf_end(c: CheckContext, name: str, dl: DesignLink) -> tuple[Port, End | None]:
    """The designed peer port of a single-link HCA, and that port as discovered (None if its switch is not)."""
    leaf_port = dl.other(Port(name, dl.a.port if dl.a.node == name else dl.b.port))
    guid = c.guid_of.get(leaf_port.node)
    return leaf_port, (End(guid, leaf_port.port) if guid else None)


def _hidden_by_duplicate(c: CheckContext, name: str, dl: DesignLink) -> bool:
    """An HCA that is not discovered because it shares its GUID with another: its leaf port claims that GUID."""
    leaf_port, end = _leaf_end(c, name, dl)
    dup = c.claimed_by.get(end) if end else None
    if dup is None:
        return False
    c.hidden.setdefault(dup, []).append(f"{name} (cabled to {leaf_port})")
    return True


def _down_hca_port(c: CheckContext, name: str, dl: DesignLink) -> bool:
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


def _unknown_devices(c: CheckContext) -> None:
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


def _missing_or_down(c: CheckContext) -> None:
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


