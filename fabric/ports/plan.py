"""`plan_ports`: every source of evidence merged into one list of links to disable or watch.

Pure: topology, events, counter sweeps, findings, policy and `now` in; a `PortPlan` out. A link is acted
on as a whole (both ends are disabled: a flapping cable takes its peer port with it). The plan is what
`fabric ports apply` consumes: `disable` (links, both ends by GUID and port), `needs_force` (the caps),
and the evidence each action rests on, for the ledger and the ticket.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fabric.design import Design
from fabric.findings import Finding
from fabric.identify import ca_name_from_description
from fabric.ports.counters import CounterRate, CounterSweep, counter_rates, resolve_lids
from fabric.ports.evidence import Burst, Evidence, scan_events
from fabric.ports.resolve import LinkEnd, Resolver
from fabric.topology import End, Link, NodeType, Topology
from fabric.ufm.events import Rejected, UfmEvent
from fabric.ufm.portrefs import event_ports
from fabric.ufm.resources import UfmPort
from provision.site.port_policy import LINK_WENT_DOWN, PortPolicy

DISABLE, WATCH = "disable", "watch"
_BEFORE = timedelta(seconds=120)  # a reset's record may trail the reset itself (clocks, the step's own time)
_WHY = {"counter": "an error counter rising above its threshold", "degraded": "trained below its rate"}


@dataclass(frozen=True)
class PlannedLink:
    a: LinkEnd
    b: LinkEnd | None  # None: a down port whose peer nobody knows (no design, not discovered)
    action: str  # disable | watch | already_disabled
    reason: str
    evidence: tuple[Evidence, ...]
    cable_serial: str | None = None

    def ends(self) -> tuple[LinkEnd, ...]:
        return (self.a,) if self.b is None else (self.a, self.b)

    def to_dict(self) -> dict[str, object]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict() if self.b else None, "action": self.action,
                "reason": self.reason, "cable_serial": self.cable_serial,
                "evidence": [e.to_dict() for e in self.evidence]}


@dataclass(frozen=True)
class CapCheck:
    ports: int
    max_ports: int
    over_uplinks: tuple[str, ...]  # "leaf-1: 3 of 8 uplinks (38% > 25%)"

    @property
    def needs_force(self) -> bool:
        return self.ports > self.max_ports or bool(self.over_uplinks)

    def reasons(self) -> list[str]:
        out = [f"{self.ports} ports to disable > the cap of {self.max_ports} per run"] \
            if self.ports > self.max_ports else []
        return out + list(self.over_uplinks)


@dataclass(frozen=True)
class PortPlan:
    now: datetime
    since: datetime
    disable: tuple[PlannedLink, ...]
    watch: tuple[PlannedLink, ...]
    already_disabled: tuple[PlannedLink, ...]
    set_apart: tuple[Rejected, ...]
    bursts: tuple[Burst, ...]
    cap: CapCheck
    summary: Mapping[str, object] = field(default_factory=dict)

    @property
    def needs_force(self) -> bool:
        return self.cap.needs_force


@dataclass
class _Acc:
    """Evidence gathered for one link (or one lone down port)."""

    ends: tuple[End, ...]
    evidence: list[Evidence] = field(default_factory=list)
    cable: str | None = None


def _key(link: Link) -> tuple[End, ...]:
    return (link.a, link.b)


# A link the port ledger has out of service: its ends, and why (shown apart as under repair).
UnderRepair = tuple[tuple[LinkEnd, ...], str]


class _Planner:
    def __init__(self, topology: Topology, policy: PortPolicy, design: Design | None,
                 ufm_ports: Mapping[End, UfmPort] | None, under_repair: Mapping[End, UnderRepair],
                 unfinished: Mapping[End, UnderRepair]) -> None:
        self.r = Resolver(topology, design, ufm_ports)
        self.under_repair = {**unfinished, **under_repair}  # links of the ledger: evidence filed under them
        self.repairing = under_repair
        self.repair_keys: dict[tuple[End, ...], UnderRepair] = {}
        self.unfinished_keys: dict[tuple[End, ...], UnderRepair] = {}
        self.policy = policy
        self.acc: dict[tuple[End, ...], _Acc] = {}
        self.apart: list[Rejected] = []
        self.disabled_ends: set[End] = {e for e, p in (ufm_ports or {}).items() if p.disabled}
        self.host_downs: list[tuple[UfmEvent, End, tuple[str, End], str | None]] = []
        self.unpaired_down = 0

    def _repair_key(self, end: End) -> tuple[End, ...] | None:
        repair = self.under_repair.get(end)
        if repair is None:
            return None
        key = tuple(End(e.guid, e.port) for e in repair[0])
        (self.repair_keys if end in self.repairing else self.unfinished_keys)[key] = repair
        return key

    def add(self, end: End, ev: Evidence, cable: str | None = None) -> bool:
        repair = self._repair_key(end)
        if repair is not None:  # its ports may be gone from the discovery: filed under the ledger's link
            self.acc.setdefault(repair, _Acc(repair)).evidence.append(ev)
            return True
        link = self.r.link(end)
        key = _key(link) if link is not None else (end,)
        acc = self.acc.setdefault(key, _Acc(key))
        acc.evidence.append(ev)
        acc.cable = acc.cable or cable
        return link is not None

    def event(self, ev: UfmEvent) -> None:
        named = event_ports(ev)
        raw = [End(ref.guid, ref.port) for ref in named.ports if ref.guid is not None and ref.port is not None]
        repaired = next((e for e in raw if e in self.under_repair), None)
        if repaired is not None:
            self.add(repaired, Evidence(ev.time, ev.where(), "event", repaired, f"[{ev.code}] {ev.message}", ev.code))
            return
        ends = [e for e in (self.r.end(ref) for ref in named.ports) if e is not None]
        linked = [e for e in ends if self.r.link(e) is not None]
        if not linked:
            what = ", ".join(ref.describe() for ref in named.ports) or "no port"
            self.apart.append(Rejected(ev.source, ev.line, f"event [{ev.code}] names {what}: not a cabled port of "
                                       "the discovered fabric"))
            return
        end = linked[0]
        link = self.r.link(end)
        cable = named.cable_serial or (self.r.cable(link) if link else None)
        hca = self._hca(link) if link is not None and ev.code == LINK_WENT_DOWN else None
        if hca is not None:  # judged once every event is in: alone, or with the rest of its host
            self.host_downs.append((ev, end, hca, cable))
            return
        self.add(end, Evidence(ev.time, ev.where(), "event", end, f"[{ev.code}] {ev.message}", ev.code), cable)

    def _hca(self, link: Link) -> tuple[str, End] | None:
        """(host, HCA end) of a switch-to-host link; None for a switch-to-switch one."""
        for e in _key(link):
            node = self.r.topology.nodes.get(e.guid)
            if node is not None and node.type is not NodeType.SWITCH:
                label = ca_name_from_description(node.description)
                return (label.split("/", 1)[0] if label else f"ca-{e.guid}"), e
        return None

    def judge_host_downs(self, restarts: Mapping[str, Sequence[datetime]], source: str | None = None) -> None:
        """A host link going down is its host restarting when bringup reset or power-cycled the host just
        before (`restarts`, from the state store), or when every other HCA of the host went down within
        `host_together_seconds` of it; otherwise the link went down alone: its cable or transceiver."""
        policy = self.policy
        together = timedelta(seconds=policy.host_together_seconds)
        after = timedelta(seconds=policy.host_restart_seconds)
        times: dict[tuple[str, End], list[datetime]] = {}
        for ev, _end, (host, hca), _cable in self.host_downs:
            times.setdefault((host, hca), []).append(ev.time)
        hcas = self._host_hcas({host for _ev, _e, (host, _h), _c in self.host_downs})
        for ev, end, (host, hca), cable in self.host_downs:
            t = ev.time
            reset = next((r for r in restarts.get(host, ()) if r - _BEFORE <= t <= r + after), None)
            why = None if reset is None else (f"{host} was reset or power-cycled at {reset.isoformat()} ({source})"
                                              if source else f"bringup reset or power-cycled {host} at "
                                              f"{reset.isoformat()}")
            others = [h for h in hcas.get(host, ()) if h != hca]
            if why is None and others and all(any(abs(x - t) <= together for x in times.get((host, h), ()))
                                              for h in others):
                why = f"all {len(others) + 1} HCAs of {host} went down within {together.total_seconds():g} s"
            note = (f" (its host restarting: {why})" if why else
                    f" (alone: no other HCA of {host} went down within {together.total_seconds():g} s and no reset "
                    "of it is recorded: the cable or transceiver)")
            condemns = why is None or policy.host_link_down_condemns
            self.add(end, Evidence(t, ev.where(), "event", end, f"[{ev.code}] {ev.message}{note}", ev.code, condemns),
                     cable)

    def _host_hcas(self, hosts: set[str]) -> dict[str, list[End]]:
        out: dict[str, list[End]] = {}
        top = self.r.topology
        for guid, node in top.nodes.items():
            if node.type is NodeType.SWITCH or node.is_aggregation_node:
                continue
            label = ca_name_from_description(node.description)
            host = label.split("/", 1)[0] if label else f"ca-{guid}"
            if host in hosts:
                out.setdefault(host, []).extend(End(guid, port) for port, _peer in top.adjacency.get(guid, []))
        return out

    def counter(self, rate: CounterRate, at: datetime | None, source: str) -> None:
        limit = getattr(self.policy.counter_thresholds, rate.counter, None)
        if limit is None and not rate.reset:
            return
        if rate.reset:
            ev = Evidence(at, source, "counter_reset", rate.end, rate.describe(), None, False)
        else:
            ev = Evidence(at, source, "counter", rate.end, f"{rate.describe()}, threshold {limit}/h",
                          None, rate.per_hour is not None and limit is not None and rate.per_hour > limit)
        if not self.add(rate.end, ev):
            self.acc.pop((rate.end,), None)
            self.apart.append(Rejected(source, None, f"counters of 0x{rate.end.guid}[{rate.end.port}]: not a "
                                       "cabled port of the discovered fabric"))

    def finding(self, f: Finding) -> None:
        ends = [End(e.guid, e.port) for e in (f.a, f.b) if e is not None and e.guid and e.port is not None]
        if not ends or f.kind not in {"degraded", "port_down"}:
            return
        disabled = f.kind == "port_down" and "disabled" in f.seen.lower()
        if f.kind == "port_down" and f.b is None and not disabled and self.r.link(ends[0]) is None:
            self.unpaired_down += 1  # an empty port, as far as anyone can tell without a design
            return
        kind = "disabled" if disabled else f.kind
        text = f"{f.kind}: expected {f.expected}; seen {f.seen}"
        ev = Evidence(None, "findings", kind, ends[0], text, None, f.kind == "degraded")
        if disabled:
            self.disabled_ends.update(ends)
        if self.r.link(ends[0]) is None and len(ends) == 2:
            key = tuple(ends)
            self.acc.setdefault(key, _Acc(key)).evidence.append(ev)
        else:
            self.add(ends[0], ev)


def _rates(sweeps: Sequence[CounterSweep], topology: Topology, apart: list[Rejected]) -> list[CounterRate]:
    if len(sweeps) < 2:
        if sweeps:
            apart.append(Rejected(sweeps[0].source, None, "one counter sweep gives no rate: counters are read "
                                  "twice, so a port's old errors never condemn it"))
        return []
    resolved = []
    for sweep in sorted(sweeps, key=lambda s: s.taken_at.timestamp() if s.taken_at else 0.0)[-2:]:
        swept, lost = resolve_lids(sweep, topology)
        apart.extend(lost + sweep.rejected)
        resolved.append(swept)
    return list(counter_rates(resolved[0], resolved[1]))


def plan_ports(topology: Topology, events: Iterable[UfmEvent | Rejected], counters: Sequence[CounterSweep],
               findings: Iterable[Finding], policy: PortPolicy, now: datetime, design: Design | None = None,
               *, since: timedelta | None = None, ufm_ports: Mapping[End, UfmPort] | None = None,
               evidence: Iterable[Evidence] = (), under_repair: Mapping[End, UnderRepair] | None = None,
               unfinished: Mapping[End, UnderRepair] | None = None,
               restarts: Mapping[str, Sequence[datetime]] | None = None, restarts_from: str | None = None,
               ) -> PortPlan:
    """Every source merged into the links to act on. `evidence` is what other tools established about a
    port (the burn-in judge's failing links, source `burnin`), taken as it is. `under_repair` maps each end
    of a link the port ledger has out of service to that link: its evidence is filed under it, and it is
    shown apart (already disabled, under repair), never planned again. `unfinished` maps each end of a link
    an apply left part way (`apply_failed`, `job_timeout`) to that link: its evidence is filed under it too
    (a disabled port vanishes from discovery), and it is planned as any other link, even with one of its
    ports disabled, so that the rerun finishes it (the disabled end is read and not sent again).
    `restarts`: when each host was reset or power-cycled, by bringup (the state store's record) or, named by
    `restarts_from`, as another source says (`fabric ports plan --resets`)."""
    window = since or policy.window
    p = _Planner(topology, policy, design, ufm_ports, under_repair or {}, unfinished or {})
    scan = scan_events(events, policy, now, window)
    p.apart.extend(scan.set_apart)
    for ev in scan.counted:
        p.event(ev)
    p.judge_host_downs(restarts or {}, restarts_from)
    rates = _rates(counters, topology, p.apart)
    after = max(counters, key=lambda s: s.taken_at.timestamp() if s.taken_at else 0.0) if counters else None
    for rate in rates:
        p.counter(rate, after.taken_at if after else None, after.source if after else "counters")
    for f in findings:
        p.finding(f)
    for given in evidence:
        p.add(given.at, given)
    return _decide(p, now, now - window, scan.bursts, {
        "events_scanned": scan.scanned, "events_counted": len(scan.counted), "events_in_bursts": scan.in_bursts,
        "uncounted_codes": dict(sorted(scan.uncounted_codes.items())), "counter_rates": len(rates),
        "down_ports_without_peer": p.unpaired_down})


def _decide(p: _Planner, now: datetime, since: datetime, bursts: tuple[Burst, ...],
            summary: dict[str, object]) -> PortPlan:
    out: dict[str, list[PlannedLink]] = {DISABLE: [], WATCH: [], "already_disabled": []}
    for key, acc in p.acc.items():
        evidence = tuple(sorted(acc.evidence, key=lambda e: (e.time is None, e.time or now, e.source)))
        condemning = [e for e in evidence if e.condemns]
        flaps = 0 if p.policy.host_link_down_condemns else sum(
            1 for e in condemning if e.kind == "event" and e.code == LINK_WENT_DOWN and _host_link(p, key))
        events = sum(1 for e in condemning if e.kind == "event") - flaps
        other = [e for e in condemning if e.kind != "event"]
        repair = p.repair_keys.get(key)
        if repair is not None:
            out["already_disabled"].append(PlannedLink(repair[0][0], repair[0][1] if len(repair[0]) > 1 else None,
                                                        "already_disabled", f"under repair: {repair[1]}", evidence,
                                                        acc.cable))
            continue
        unfinished = p.unfinished_keys.get(key)
        if any(e in p.disabled_ends for e in key) and unfinished is None:
            action, reason = "already_disabled", "a port of this link is already disabled"
        elif events >= p.policy.condemn_events or other or flaps >= p.policy.host_flap_events:
            action = DISABLE
            reason = "; ".join([f"{events} counted event(s) in the window"] * bool(events)
                               + [f"{flaps} link-downs of this host link alone, its host not restarting: a "
                                  "flapping cable or transceiver"] * (flaps >= p.policy.host_flap_events)
                               + sorted({_WHY[e.kind] for e in other}))
        else:
            action, reason = WATCH, "evidence below the policy's thresholds"
        ends = list(unfinished[0]) if unfinished is not None else [p.r.link_end(e) for e in key]
        if unfinished is not None:
            reason += f" (finishing what {unfinished[1]} left undone)"
        out[action].append(PlannedLink(ends[0], ends[1] if len(ends) > 1 else None, action, reason, evidence,
                                       acc.cable))
    for items in out.values():
        items.sort(key=lambda pl: (pl.a.name, pl.a.port))
    cap = _cap(p, out[DISABLE])
    summary.update({"disable": len(out[DISABLE]), "watch": len(out[WATCH]),
                    "already_disabled": len(out["already_disabled"]), "set_apart": len(p.apart),
                    "bursts": len(bursts), "needs_force": cap.needs_force, "cap": cap.reasons()})
    return PortPlan(now, since, tuple(out[DISABLE]), tuple(out[WATCH]), tuple(out["already_disabled"]),
                    tuple(p.apart), bursts, cap, summary)


def _host_link(p: _Planner, key: tuple[End, ...]) -> bool:
    return any((node := p.r.topology.nodes.get(e.guid)) is not None and node.type is not NodeType.SWITCH for e in key)


def _cap(p: _Planner, disable: list[PlannedLink]) -> CapCheck:
    per_switch: dict[str, int] = {}
    for pl in disable:
        link = p.r.link(End(pl.a.guid, pl.a.port))
        owner = p.r.uplink_owner(link) if link is not None else None
        if owner is not None:
            per_switch[owner] = per_switch.get(owner, 0) + 1
    over = []
    for guid, n in sorted(per_switch.items()):
        total = p.r.uplinks[guid]
        share = 100.0 * n / total
        if share > p.policy.max_uplink_percent:
            over.append(f"{p.r.name(guid)}: {n} of its {total} uplinks ({share:.0f}% > "
                        f"{p.policy.max_uplink_percent:g}%)")
    ports = sum(len(pl.ends()) for pl in disable)
    return CapCheck(ports, p.policy.max_ports, tuple(over))
