"""Judging a burn-in run: every routed directed link `pass`, `fail`, `unknown` or `not_covered`, and why.

Pure: the plan's JSON and the run's flow and port rows in, verdicts out. The floor is the plan's (the
site's, default 90% of the design's line rate per direction). Evidence that names a link directly comes
first: an error counter that rose on one of its ports during the run (symbol errors, link downed, receive
errors...), or a trained rate below the floor (a 1X link). Slow flows that direct evidence does not
explain implicate the links on their paths; a link that carried a fast flow is cleared, and of the rest
the judge condemns the fewest links that explain every slow flow (links no flow tells apart are condemned
together). A link is `pass` only when a fast flow crossed it and nothing condemns it; a link crossed only
by flows whose result is unknown (host hung, SSH dropped, garbage, switch not answering) is `unknown`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fabric.burnin.history import FlowRow, PortRow
from fabric.parsers.common import norm_guid
from fabric.ports.evidence import Evidence
from fabric.topology import End
from provision.state.identifiers import guid_0x

ERROR_COUNTERS = frozenset({"symbol_errors", "link_downed", "rcv_errors", "link_error_recovery",
                            "rcv_remote_physical_errors", "local_link_integrity_errors",
                            "excessive_buffer_overrun_errors"})
PASS, FAIL, UNKNOWN, NOT_COVERED = "pass", "fail", "unknown", "not_covered"
SLOWED = "only flows slowed by a failing link"


@dataclass(frozen=True)
class LinkVerdict:
    link: str  # "tail[port]->head[port]"
    name: str
    ends: tuple[str, str]  # both ends with their locations
    kind: str
    verdict: str
    reason: str
    best_gbps: float | None  # the fastest ok flow over it
    errors: int  # error counter increments on its ports during the run
    remediation: str = ""


@dataclass(frozen=True)
class HostVerdict:
    host: str
    verdict: str  # pass | fail | unknown
    reason: str
    hca_guids: tuple[str, ...] = ()  # the node GUIDs of its HCAs the burn-in reached (0x + 16 hex digits)


@dataclass(frozen=True)
class Judgement:
    floor_gbps: float
    links: tuple[LinkVerdict, ...]
    hosts: tuple[HostVerdict, ...]
    unexplained: tuple[str, ...] = ()  # slow flows no link explains (every link of theirs carried a fast flow)
    counts: Mapping[str, int] = field(default_factory=dict)

    def failing(self) -> list[LinkVerdict]:
        return [lk for lk in self.links if lk.verdict == FAIL]


def _end(text: str) -> End:
    guid, _, port = text.partition("[")
    return End(guid, int(port.rstrip("]")))


def _direct_evidence(plan: Mapping[str, Any], ports: Sequence[PortRow], floor: float) -> dict[str, list[str]]:
    """Directed link -> what names it directly (counters on its ports, its trained rate)."""
    by_port: dict[End, list[str]] = {}
    for p in ports:
        if p.status == "ok" and p.counter in ERROR_COUNTERS and (p.delta or 0) > 0:
            by_port.setdefault(End(p.guid, p.port), []).append(f"{p.counter} +{p.delta} in stage {p.stage}")
    out: dict[str, list[str]] = {}
    for entry in plan.get("links", []):
        tail, head = (_end(t) for t in entry["link"].split("->"))
        said = by_port.get(tail, []) + by_port.get(head, [])
        rate = entry.get("trained_gbps")
        if rate is not None and float(rate) < floor:
            said.append(f"trained at {entry.get('width', '?')} {entry.get('speed', '?')} ({float(rate):g} Gb/s), "
                        f"below the floor of {floor:g} Gb/s")
        if said:
            out[entry["link"]] = said
    return out


def _errors(ports: Sequence[PortRow]) -> dict[End, int]:
    out: dict[End, int] = {}
    for p in ports:
        if p.status == "ok" and p.counter in ERROR_COUNTERS:
            out[End(p.guid, p.port)] = out.get(End(p.guid, p.port), 0) + (p.delta or 0)
    return out


def _cover(slow: dict[int, set[str]], cleared: set[str]) -> tuple[set[str], list[int]]:
    """Fewest uncleared links explaining the slow flows (greedy; indistinguishable links go together)."""
    todo = {i: links - cleared for i, links in slow.items()}
    unexplained = [i for i, links in todo.items() if not links]
    todo = {i: links for i, links in todo.items() if links}
    chosen: set[str] = set()
    while todo:
        hits: dict[str, frozenset[int]] = {}
        for i, links in todo.items():
            for link in links:
                hits[link] = hits.get(link, frozenset()) | {i}
        best = max(len(v) for v in hits.values())
        top = sorted(link for link, v in hits.items() if len(v) == best)
        explained = hits[top[0]]
        chosen.update(link for link in top if hits[link] == explained)
        todo = {i: links for i, links in todo.items() if i not in explained}
    return chosen, unexplained


def judge(plan: Mapping[str, Any], flows: Sequence[FlowRow], ports: Sequence[PortRow]) -> Judgement:
    floor = float(plan.get("floor_gbps") or 0.9 * float(plan.get("line_rate_gbps") or 0))
    stage_links = {(n, f["src"], f["dst"]): f["links"] for n, st in enumerate(plan.get("stages", []), 1) for f in st}
    fast: dict[str, float] = {}
    slow: dict[int, set[str]] = {}
    unknown: dict[str, str] = {}
    slow_text: dict[int, str] = {}
    for i, row in enumerate(flows):
        links = stage_links.get((row.stage, row.src, row.dst), [])
        if row.status != "ok" or row.gbps is None:
            for link in links:
                unknown.setdefault(link, f"{row.src_name} -> {row.dst_name}: {row.reason}")
        elif row.gbps >= floor:
            for link in links:
                fast[link] = max(fast.get(link, 0.0), row.gbps)
        else:
            slow[i] = set(links)
            slow_text[i] = f"{row.src_name} -> {row.dst_name} {row.gbps:g} Gb/s (stage {row.stage})"
    direct = _direct_evidence(plan, ports, floor)
    slow_left = {i: links for i, links in slow.items() if not links & set(direct)}
    cleared = set(fast) - set(direct)
    covered, unexplained = _cover(slow_left, cleared)
    errors = _errors(ports)
    verdicts = [_verdict(entry, direct, covered, slow, slow_text, fast, unknown, errors)
                for entry in plan.get("links", [])]
    verdicts += [LinkVerdict(e["link"], e["name"], tuple(e.get("ends", e["name"].split(" -> "))), e["kind"],
                             NOT_COVERED, "no HCA-to-HCA route crosses it under these tables", None, 0,
                             e.get("fix", "")) for e in plan.get("not_routed", [])]
    hosts = _hosts(plan, verdicts)
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return Judgement(floor, tuple(verdicts), hosts, tuple(slow_text[i] for i in unexplained), counts)


def _verdict(entry: Mapping[str, Any], direct: Mapping[str, list[str]], covered: set[str],
             slow: Mapping[int, set[str]], slow_text: Mapping[int, str], fast: Mapping[str, float],
             unknown: Mapping[str, str], errors: Mapping[End, int]) -> LinkVerdict:
    link = entry["link"]
    tail, head = (_end(t) for t in link.split("->"))
    ends = tuple(entry.get("ends") or entry["name"].split(" -> "))
    errs = errors.get(tail, 0) + errors.get(head, 0)
    # the design's names where the plan has them (a factory switch description names no switch)
    name = " -> ".join(e.split(" (", 1)[0] for e in (ends[0], ends[-1])) if entry.get("ends") else entry["name"]
    base = (link, name, (ends[0], ends[-1]), entry["kind"])
    fix = "reseat or replace the cable/transceiver, clean the connectors, then burn it in again"
    if link in direct:
        return LinkVerdict(*base, FAIL, "; ".join(direct[link]), fast.get(link), errs, fix)
    if link in covered:
        mine = [slow_text[i] for i, links in slow.items() if link in links]
        return LinkVerdict(*base, FAIL, f"explains {len(mine)} slow flow(s) no fast flow clears: "
                           + "; ".join(mine[:3]), None, errs, fix)
    if link in fast:
        return LinkVerdict(*base, PASS, f"carried {fast[link]:g} Gb/s", fast[link], errs)
    if link in unknown:
        return LinkVerdict(*base, UNKNOWN, f"only unknown flows crossed it ({unknown[link]})", None, errs,
                           "fix what made the flow unknown (the host or switch named), then run again")
    if any(link in links for links in slow.values()):
        return LinkVerdict(*base, NOT_COVERED, f"{SLOWED} elsewhere crossed it, so it was never seen at full rate",
                           None, errs,
                           "burn in again once the failing link is repaired or disabled")
    return LinkVerdict(*base, NOT_COVERED, "no flow reached it at full rate in this run", None, errs,
                       "plan again: it was not burned")


def _hosts(plan: Mapping[str, Any], verdicts: Iterable[LinkVerdict]) -> tuple[HostVerdict, ...]:
    """A host passes when every directed link of its HCAs passed."""
    per: dict[str, list[LinkVerdict]] = {}
    guids: dict[str, set[str]] = {}
    for v in verdicts:
        if v.kind not in ("hca-leaf", "leaf-hca"):
            continue
        side = 0 if v.kind == "hca-leaf" else 1
        host = v.name.split(" -> ")[side].split("/", 1)[0]
        per.setdefault(host, []).append(v)
        guids.setdefault(host, set()).add(guid_0x(norm_guid(v.link.split("->")[side].split("[", 1)[0])[0]))
    out = []
    for host, vs in sorted(per.items()):
        bad = [v for v in vs if v.verdict == FAIL]
        if bad:
            out.append(HostVerdict(host, FAIL, f"{bad[0].name}: {bad[0].reason}"))
        elif all(v.verdict == PASS for v in vs):
            out.append(HostVerdict(host, PASS, f"all {len(vs)} HCA links passed", tuple(sorted(guids[host]))))
        else:
            left = [v for v in vs if v.verdict != PASS]
            out.append(HostVerdict(host, UNKNOWN, f"{left[0].name}: {left[0].verdict}: {left[0].reason}"))
    return tuple(out)


def port_evidence(j: Judgement, now: datetime | None = None) -> list[Evidence]:
    """Failing links as the port plan's evidence (source `burnin`), one per directed link, at its tail."""
    at = now or datetime.now(UTC)
    return [Evidence(at, "burnin", "degraded", _end(v.link.split("->")[0]),
                     f"burn-in: {v.name}: {v.reason}", None, True) for v in j.failing()]


def physical_failures(j: Judgement) -> list[tuple[tuple[str, str], list[LinkVerdict]]]:
    """Failing directed links grouped by cable (both directions of one link together)."""
    groups: dict[frozenset[str], list[LinkVerdict]] = {}
    for v in j.failing():
        groups.setdefault(frozenset(v.link.split("->")), []).append(v)
    return [(vs[0].ends, vs) for vs in groups.values()]


__all__ = ["Judgement", "LinkVerdict", "judge", "physical_failures", "port_evidence"]
