"""A `PortPlan` as JSON (what `fabric ports apply` and scripts read) and as text for a person."""

from __future__ import annotations

from typing import Any

from fabric.ports.plan import PlannedLink, PortPlan

MAX_APART_SHOWN = 20


def plan_to_dict(plan: PortPlan) -> dict[str, Any]:
    return {
        "now": plan.now.isoformat(),
        "since": plan.since.isoformat(),
        "needs_force": plan.needs_force,
        "cap": plan.cap.reasons(),
        "links": [pl.to_dict() for pl in plan.disable + plan.watch],
        "already_disabled": [pl.to_dict() for pl in plan.already_disabled],
        "bursts": [{"start": b.start.isoformat(), "end": b.end.isoformat(), "events": b.events}
                   for b in plan.bursts],
        "set_apart": [{"source": r.source, "line": r.line, "reason": r.reason, "text": r.text}
                      for r in plan.set_apart],
        "summary": dict(plan.summary),
    }


def _link_lines(pl: PlannedLink) -> list[str]:
    ends = " <-> ".join(e.describe() for e in pl.ends())
    cable = f", cable S/N {pl.cable_serial}" if pl.cable_serial else ""
    lines = [f"{pl.action.upper()} {ends}{cable}: {pl.reason}"]
    for ev in pl.evidence:
        when = ev.time.isoformat() if ev.time else "now"
        lines.append(f"    {when} {ev.source}: {ev.text}")
    return lines


def plan_text(plan: PortPlan) -> str:
    s = plan.summary
    out = [f"port plan {plan.since.isoformat()} .. {plan.now.isoformat()}: {s.get('disable')} link(s) to "
           f"disable, {s.get('watch')} to watch, {s.get('already_disabled')} already disabled"]
    for pl in plan.disable + plan.watch + plan.already_disabled:
        out.extend(_link_lines(pl))
    for b in plan.bursts:
        out.append(f"burst (UFM restart or mass reboot, not counted): {b.describe()}")
    uncounted = s.get("uncounted_codes")
    if isinstance(uncounted, dict) and uncounted:
        codes = ", ".join(f"{code} ({n}x)" for code, n in uncounted.items())
        out.append(f"event codes neither counted nor ignored by the policy: {codes}")
    if plan.needs_force:
        out.append("NEEDS --force: " + "; ".join(plan.cap.reasons()))
    for r in plan.set_apart[:MAX_APART_SHOWN]:
        out.append(f"set apart: {r.describe()}")
    if len(plan.set_apart) > MAX_APART_SHOWN:
        out.append(f"set apart: {len(plan.set_apart) - MAX_APART_SHOWN} more (see --json)")
    return "\n".join(out) + "\n"
