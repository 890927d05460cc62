"""A burn-in plan as JSON (what the runner reads) and as text.

The JSON states the proof: each routed directed link's load in every stage (recomputed from the
tables by `plan_loads`, at most 1), the lower bound, why and its witness (the links and HCAs that force
it), the links that forced any stage beyond it, the routing engine opensm's log names (a fallback is a
warning), links no route crosses (`not_routed`, with what to do), down ports, HCAs that cannot take part,
and flows whose route is unknown.
"""

from __future__ import annotations

from typing import Any

from fabric.burnin.engine import RoutingEngine
from fabric.burnin.plan import Flow, Plan, plan_loads
from fabric.burnin.rates import line_rate_gbps
from fabric.burnin.routes import DirectedLink, Routing
from fabric.topology import End, Link

NOT_ROUTED_FIX = ("no HCA-to-HCA route crosses this link under these forwarding tables, so it carries no data "
                  "traffic and no burn-in can load it: route it (another engine, e.g. `opensm -R updn`, or ftree "
                  "with the right root GUIDs) and plan again, or burn it from a switch-side test")


def flow_json(routing: Routing, flow: Flow) -> dict[str, Any]:
    src_host, src_hca = flow.src.name.split("/", 1)
    dst_host, dst_hca = flow.dst.name.split("/", 1)
    return {
        "src": f"0x{flow.src.port_guid}", "dst": f"0x{flow.dst.port_guid}",
        "src_name": flow.src.name, "dst_name": flow.dst.name,
        "src_host": src_host, "src_hca": src_hca, "src_port": flow.src.end.port, "src_lid": flow.src.lid,
        "dst_host": dst_host, "dst_hca": dst_hca, "dst_port": flow.dst.end.port, "dst_lid": flow.dst.lid,
        "links": [str(routing.links[i]) for i in flow.links],
    }


def _rate(trained: dict[frozenset[End], Link], link: DirectedLink) -> dict[str, Any]:
    """The rate the link trained at, as the discovery shows it."""
    seen = trained.get(frozenset((link.tail, link.head)))
    if seen is None:
        return {}
    return {"width": seen.width, "speed": seen.speed, "trained_gbps": line_rate_gbps(seen.width, seen.speed)}


def _names(routing: Routing, links: tuple[int, ...]) -> list[dict[str, str]]:
    return [{"link": str(routing.links[i]), "name": routing.link_name(routing.links[i])} for i in links]


def witness_json(plan: Plan) -> dict[str, Any] | None:
    """The group of links and HCAs that proves the lower bound (re-derivable from the tables)."""
    w, routing = plan.witness, plan.routing
    if w is None:
        return None
    return {"kind": w.kind, "links": _names(routing, w.links),
            "hcas": [routing.hcas[i].name for i in w.hcas],
            "switches": [routing.names[routing.switch_guids[x]] for x in w.switches]}


def plan_json(plan: Plan, engine: RoutingEngine | None = None) -> dict[str, Any]:
    """`engine`: what opensm's log says programmed the tables (its fallback is one of the warnings)."""
    routing = plan.routing
    loads = plan_loads(plan)
    top = routing.topology
    trained = {frozenset((lk.a, lk.b)): lk for lk in top.links}
    warning = engine.warning() if engine is not None else None
    return {
        "stages": [[flow_json(routing, f) for f in stage] for stage in plan.stages],
        "lower_bound": plan.lower_bound,
        "lower_bound_reason": plan.bound_reason,
        "lower_bound_witness": witness_json(plan),
        "stages_needed": len(plan.stages),
        "at_lower_bound": len(plan.stages) == plan.lower_bound,
        "forced_extra_stages": _names(routing, plan.forced),
        "routing_engine": engine.to_dict() if engine is not None else None,
        "hcas": len(routing.hcas),
        "links": [{"link": str(routing.links[i]), "name": routing.link_name(routing.links[i]),
                   "kind": routing.links[i].kind, "load": load, **_rate(trained, routing.links[i])}
                  for i, load in sorted(loads.items())],
        "not_routed": [{"link": str(routing.links[i]), "name": routing.link_name(routing.links[i]),
                        "kind": routing.links[i].kind, "fix": NOT_ROUTED_FIX} for i in plan.not_routed],
        "uncovered": [{"link": str(routing.links[i]), "name": routing.link_name(routing.links[i]),
                       "reason": "routed, but only by flows whose route is unknown or that no stage could fit"}
                      for i in plan.uncovered],
        "down": [{"port": str(d.end), "name": routing.end_name(d.end),
                  "reason": f"port is {d.state} in the discovered fabric: no flow can cross it"}
                 for d in top.down_ports],
        "excluded": [{"what": e.what, "reason": e.reason} for e in routing.excluded],
        "unknown": [{"reason": reason, "flows": n} for reason, n in plan.unknown],
        "warnings": [*([warning] if warning else []), *routing.warnings],
        "switches": [{"guid": g, "name": routing.names.get(g, g), "lid": top.nodes[g].lid}
                     for g in routing.switch_guids if top.nodes[g].lid is not None],
    }


def plan_text(plan: Plan) -> str:
    routing = plan.routing
    lines = [f"{len(plan.stages)} stages for {len(plan.routed)} routed directed links "
             f"({len(routing.hcas)} HCAs); lower bound {plan.lower_bound}: {plan.bound_reason}"]
    if plan.forced:
        lines.append(f"{len(plan.forced)} links did not fit in {plan.lower_bound} stages and forced the rest:")
        lines += [f"  {routing.link_name(routing.links[i])}" for i in plan.forced[:20]]
    for n, stage in enumerate(plan.stages, start=1):
        lines.append(f"stage {n}: {len(stage)} flows")
        lines += [f"  {f.src.name} -> {f.dst.name} ({len(f.links)} links)" for f in stage]
    if plan.not_routed:
        lines.append(f"not routed ({len(plan.not_routed)}): {NOT_ROUTED_FIX}")
        lines += [f"  {routing.link_name(routing.links[i])}" for i in plan.not_routed]
    lines += [f"not burned: {routing.link_name(routing.links[i])}: only unknown routes cross it"
              for i in plan.uncovered]
    lines += [f"down: {routing.end_name(d.end)}: {d.state}" for d in routing.topology.down_ports]
    lines += [f"excluded: {e.what}: {e.reason}" for e in routing.excluded]
    lines += [f"unknown: {n} flows: {reason}" for reason, n in plan.unknown]
    return "\n".join(lines) + "\n"
