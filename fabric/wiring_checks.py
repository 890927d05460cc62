"""The checks of a fabric's wiring that run once devices are accounted for: a split fabric (`partition`),
two cables crossed at one end (`swapped`), a port cabled to the wrong peer (`miswired`) and a cable nobody
designed (`unexpected_link`)."""

from __future__ import annotations

from fabric.check_context import CheckContext
from fabric.design import DesignLink, Port
from fabric.findings import Finding
from fabric.topology import End, NodeType


def partition(c: CheckContext) -> list[set[str]]:
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


def swapped(c: CheckContext) -> None:
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


def miswired_and_unexpected(c: CheckContext) -> None:
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


def _tier_of_ports(c: CheckContext, u: Port | None, v: Port | None) -> str | None:
    tiers = [c.design.nodes[p.node].tier for p in (u, v) if p is not None]
    return c.tier_names.get(max(max(tiers, default=1), 1)) if tiers else None
