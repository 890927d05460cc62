"""The summary of a validation report: counts per finding kind and tier, devices and links on both sides."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fabric.check_context import CheckContext
from fabric.findings import KINDS, Finding
from fabric.topology import NodeType


def summarize(c: CheckContext, findings: Iterable[Finding], parts: list[set[str]]) -> dict[str, object]:
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
