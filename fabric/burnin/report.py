"""Burn-in plans (from their JSON) and judgements as text and JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabric.burnin.judge import FAIL, Judgement, physical_failures, port_evidence
from provision.state import Move
from provision.steps.runner import HostResult

Moved = tuple[list[HostResult], list[Move]] | None


def plan_summary(plan: Mapping[str, Any]) -> str:
    stages = plan.get("stages", [])
    lines = [f"{len(stages)} stages for {len(plan.get('links', []))} routed directed links ({plan.get('hcas')} HCAs); "
             f"lower bound {plan.get('lower_bound')}: {plan.get('lower_bound_reason')}"]
    engine = plan.get("routing_engine")
    if engine and engine.get("used"):
        lines.append(f"routing engine: {engine['used']}" + (f" (fell back from {', '.join(engine['failed'])})"
                                                            if engine.get("fell_back") else ""))
    lines += [f"warning: {w}" for w in plan.get("warnings", [])[:5]]
    if plan.get("forced_extra_stages"):
        forced = plan["forced_extra_stages"]
        lines.append(f"{len(forced)} links did not fit in {plan.get('lower_bound')} stages and forced the rest: "
                     + ", ".join(e["name"] for e in forced[:6]) + (", ..." if len(forced) > 6 else ""))
    if plan.get("floor_gbps"):
        lines.append(f"floor {plan['floor_gbps']:g} Gb/s per direction ({plan.get('line_rate_gbps'):g} Gb/s line rate)")
    for n, stage in enumerate(stages, start=1):
        lines.append(f"stage {n}: {len(stage)} flows")
        lines += [f"  {f['src_name']} -> {f['dst_name']} ({len(f['links'])} links)" for f in stage]
    if plan.get("not_routed"):
        lines.append(f"not routed ({len(plan['not_routed'])}): {plan['not_routed'][0]['fix']}")
        lines += [f"  {e['name']}" for e in plan["not_routed"]]
    lines += [f"not burned: {e['name']}: {e['reason']}" for e in plan.get("uncovered", [])]
    lines += [f"skipped host {e['host']}: {e['reason']}" for e in plan.get("skipped_hosts", [])]
    lines += [f"down: {e['name']}: {e['reason']}" for e in plan.get("down", [])]
    lines += [f"excluded: {e['what']}: {e['reason']}" for e in plan.get("excluded", [])]
    lines += [f"unknown: {e['flows']} flows: {e['reason']}" for e in plan.get("unknown", [])]
    return "\n".join(lines) + "\n"


def judgement_text(run: int, j: Judgement, moved: Moved) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in sorted(j.counts.items()))
    lines = [f"burn-in run {run}: {counts} (floor {j.floor_gbps:g} Gb/s per direction)"]
    for (a, b), verdicts in physical_failures(j):
        lines.append(f"FAIL link {a} <-> {b}")
        lines += [f"  {v.name}: {v.reason}" for v in verdicts]
        lines.append(f"  fix: {verdicts[0].remediation}")
    lines += [f"unknown: {v.name}: {v.reason}" for v in j.links if v.verdict == "unknown"][:20]
    lines += [f"slow flow no link explains (every link it crossed carried a fast flow; look at the hosts' HCAs/PCIe): "
              f"{t}" for t in j.unexplained]
    for h in j.hosts:
        lines.append(f"host {h.host}: {h.verdict}: {h.reason}")
    ev = port_evidence(j)
    if ev:
        lines.append(f"handed to the port plan: {len(ev)} piece(s) of evidence, source burnin")
    if moved is not None:
        results, golden = moved
        done = [r for r in results if r.ok and not r.skipped]
        failed = [r for r in results if r.failed]
        lines.append(f"recorded: {len(done)} burned_in, {len(failed)} failed (burnin_link_failed), "
                     f"{len(golden)} promoted to golden")
    return "\n".join(lines) + "\n"


def judgement_json(run: int, j: Judgement, moved: Moved) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run": run, "floor_gbps": j.floor_gbps, "counts": dict(j.counts),
        "links": [{"link": v.link, "name": v.name, "ends": list(v.ends), "kind": v.kind, "verdict": v.verdict,
                   "reason": v.reason, "gbps": v.best_gbps, "errors": v.errors, "remediation": v.remediation}
                  for v in j.links],
        "failed_links": [{"ends": list(ends), "directions": [v.name for v in vs], "reasons": [v.reason for v in vs]}
                         for ends, vs in physical_failures(j)],
        "hosts": [{"host": h.host, "verdict": h.verdict, "reason": h.reason} for h in j.hosts],
        "unexplained_slow_flows": list(j.unexplained),
        "port_plan_evidence": [e.to_dict() for e in port_evidence(j)],
    }
    if moved is not None:
        results, golden = moved
        out["recorded"] = {"burned_in": sorted(r.host for r in results if r.ok and not r.skipped),
                           "failed": sorted(r.host for r in results if r.failed),
                           "golden": sorted(o.host for o in golden)}
    return out


__all__ = ["FAIL", "judgement_json", "judgement_text", "plan_summary"]
