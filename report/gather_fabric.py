"""The fabric's side of the report: the design's tiers and switches by location, the findings of the stored
`fabric validate` result, the port ledger's links out of service and the latest burn-in's verdicts, all
folded onto the design's cables so the map colours each line by the worst that is known of it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fabric.burnin.history import History
from fabric.burnin.judge import Judgement, judge
from fabric.design import Design, DesignLink, load_design
from fabric.ports.ledger import DISABLED, OUT_OF_SERVICE, REENABLE_REFUSED, Ledger
from fabric.topology import NodeType
from provision.state import StateStore
from report.gather_hosts import stamp
from report.model import STATUS_RANK, Burnin, BurninLink, DisabledLink, FabricMap, FindingRow, MapLink, Switch

RANK = STATUS_RANK
_BURNIN_STATUS = {"pass": "pass", "fail": "fail", "unknown": "unknown", "not_covered": "not_covered"}
MAX_DETAIL = 4


def worst(statuses: Iterable[str]) -> str:
    return min(statuses, key=lambda s: RANK.get(s, len(RANK)), default="untested")


def cable_key(a: str, b: str) -> frozenset[str]:
    """One key per cable, whichever end comes first: both ends as `name[port]`."""
    return frozenset((a.strip(), b.strip()))


def burnin_section(store: StateStore) -> tuple[Burnin, Judgement | None]:
    history = History(store)
    run = history.latest_run()
    if run is None:
        return Burnin(None, 0.0, (), ()), None
    j = judge(history.run_plan(run), history.flows(run), history.ports(run))
    links = sorted(j.links, key=lambda v: (RANK.get(v.verdict, 99), v.name))
    rows = tuple(BurninLink(v.link, v.name, v.kind, v.verdict, v.best_gbps, v.errors, v.reason, v.remediation)
                 for v in links)
    return Burnin(run, j.floor_gbps, tuple(sorted(j.counts.items())), rows), j


def disabled_links(store: StateStore) -> tuple[DisabledLink, ...]:
    current = Ledger(store).current().values()
    return tuple(DisabledLink(e.link, " <-> ".join(end.describe() for end in e.ends),
                              tuple(f"{end.name}[{end.port}]" for end in e.ends), e.state, e.via, e.why, e.ticket,
                              stamp(e.at)) for e in current if e.state in OUT_OF_SERVICE)


def _end_text(end: Any) -> str:
    if not isinstance(end, dict):
        return ""
    name = end.get("name") or end.get("guid") or "?"
    port = f"[{end['port']}]" if end.get("port") is not None else ""
    loc = end.get("location")
    where = f" (row {loc.get('row')} rack {loc.get('rack')} U{loc.get('u')})" if isinstance(loc, dict) else ""
    return f"{name}{port}{where}"


def _end_key(end: Any) -> str | None:
    if isinstance(end, dict) and end.get("name") and end.get("port") is not None:
        return f"{end['name']}[{end['port']}]"
    return None


def finding_rows(validation: Mapping[str, Any] | None) -> tuple[FindingRow, ...]:
    if validation is None:
        return ()
    found = validation.get("findings")
    return tuple(FindingRow(str(f.get("kind", "?")), _end_text(f.get("a")), _end_text(f.get("b")),
                            str(f.get("expected", "")), str(f.get("seen", "")), str(f.get("fix", "")))
                 for f in (found if isinstance(found, list) else []) if isinstance(f, dict))


def cable_statuses(validation: Mapping[str, Any] | None, disabled: Sequence[DisabledLink],
                   j: Judgement | None) -> dict[frozenset[str], list[tuple[str, str]]]:
    """Cable -> every (status, why) known of it: burn-in verdicts, findings, links out of service."""
    known: dict[frozenset[str], list[tuple[str, str]]] = {}
    for v in j.links if j is not None else ():
        a, _, b = v.name.partition(" -> ")
        known.setdefault(cable_key(a, b), []).append((_BURNIN_STATUS.get(v.verdict, "unknown"),
                                                     f"burn-in {v.verdict}: {v.reason}"))
    found = (validation or {}).get("findings")
    for f in found if isinstance(found, list) else []:
        ends = (_end_key(f.get("a")), _end_key(f.get("b"))) if isinstance(f, dict) else (None, None)
        if ends[0] and ends[1]:
            known.setdefault(cable_key(ends[0], ends[1]), []).append(
                ("finding", f"{f.get('kind')}: seen {f.get('seen')}"))
    for d in disabled:
        if d.state in (DISABLED, REENABLE_REFUSED) and len(d.ports) == 2:
            known.setdefault(cable_key(*d.ports), []).append(("disabled", f"{d.state} ({d.via}): {d.why}"))
    return known


def _endpoint(design: Design, node: str) -> tuple[str, bool]:
    """(what the map draws for this end: a switch, or the rack of a host's HCA; whether it is a switch)."""
    n = design.nodes[node]
    if n.type is NodeType.SWITCH:
        return node, True
    rack = n.location.rack if n.location is not None else (n.host or node)
    return f"rack {rack}", False


def map_links(design: Design, known: Mapping[frozenset[str], list[tuple[str, str]]]) -> tuple[MapLink, ...]:
    groups: dict[tuple[str, str], list[tuple[DesignLink, list[tuple[str, str]]]]] = {}
    for link in design.links:
        (a, a_switch), (b, _) = _endpoint(design, link.a.node), _endpoint(design, link.b.node)
        if not a_switch:
            a, b = b, a
        groups.setdefault((a, b), []).append((link, known.get(cable_key(str(link.a), str(link.b)), [])))
    out = []
    for (a, b), cables in groups.items():
        per_cable = [worst(s for s, _ in facts) for _, facts in cables]
        bad = [f"{link.a} - {link.b}: {why}" for link, facts in cables for s, why in facts
               if s not in ("pass", "ok")]
        counts = {s: per_cable.count(s) for s in sorted(set(per_cable), key=lambda s: RANK.get(s, 99))}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        detail = f"{a} - {b}: {len(cables)} cable(s): {summary}" + "".join(f"\n{x}" for x in bad[:MAX_DETAIL])
        out.append(MapLink(a, b, design.link_tier(cables[0][0]), len(cables), worst(per_cable), detail))
    return tuple(out)


def fabric_map(design_path: Path | None, validation: Mapping[str, Any] | None, validation_source: str,
               disabled: tuple[DisabledLink, ...], j: Judgement | None) -> FabricMap:
    findings = finding_rows(validation)
    if design_path is None:
        return FabricMap("", (), (), (), (), validation_source, findings, disabled)
    design = load_design(design_path)
    links = map_links(design, cable_statuses(validation, disabled, j))
    per_switch: dict[str, int] = {}
    for link in links:
        for end in (link.a, link.b):
            per_switch[end] = per_switch.get(end, 0) + link.cables
    switches = sorted(design.switches(), key=lambda n: (-n.tier, n.location.sort_key() if n.location else (), n.name))
    racks = sorted({link.b for link in links if link.b.startswith("rack ")})
    return FabricMap(design.name, tuple(design.tier_names().values()),
                     tuple(Switch(n.name, n.tier, n.model or "", str(n.location) if n.location else "",
                                  per_switch.get(n.name, 0)) for n in switches),
                     tuple(racks), links, validation_source, findings, disabled)

