"""plan_ports: evidence from every source merged into links to disable or watch, with the caps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fabric.design import load_design
from fabric.parsers.iblinkinfo import parse_iblinkinfo
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import parse_counters
from fabric.ports.linkstate import findings_from_iblinkinfo
from fabric.ports.plan import PortPlan, plan_ports
from fabric.topology import End, Topology
from fabric.ufm.events import iter_event_log, parse_event_log
from provision.site.port_policy import PortPolicy
from tests.fabric.ports.helpers import IBSIM, LEAF, REPO, SPINE

NOW = datetime(2026, 12, 1, 19, 0, tzinfo=UTC)
Q = "Quantum Mellanox Technologies"


def _topology() -> Topology:
    return parse_ibnetdiscover((IBSIM / "ibnetdiscover.txt").read_text())


def _fixture_plan(**kw: object) -> PortPlan:
    events = iter_event_log((IBSIM / "event.log").read_text().splitlines(), "event.log")
    sweeps = [parse_counters((IBSIM / n).read_text(), n) for n in ("perfquery-before.txt", "perfquery-after.txt")]
    findings = findings_from_iblinkinfo(parse_iblinkinfo((IBSIM / "iblinkinfo.txt").read_text()))
    return plan_ports(_topology(), events, sweeps, findings, PortPolicy(), NOW, **kw)  # type: ignore[arg-type]


def _leaf_ports(links: tuple[object, ...]) -> list[int]:
    return sorted(pl.a.port for pl in links)  # type: ignore[attr-defined]


def test_every_source_lands_on_its_link_and_each_link_carries_both_ends() -> None:
    plan = _fixture_plan()
    assert _leaf_ports(plan.disable) == [5, 6, 7, 25, 29, 40]
    assert _leaf_ports(plan.watch) == [8, 12]  # a counter reset; a port that went down (iblinkinfo)
    by_port = {pl.a.port: pl for pl in plan.disable}
    assert (by_port[25].b.guid, by_port[25].b.port) == (SPINE, 2)  # type: ignore[union-attr]
    assert {e.kind for e in by_port[5].evidence} == {"event", "counter"}
    assert not plan.needs_force


def test_one_host_link_down_alone_counts_but_is_below_the_flap_threshold_its_counter_rate_condemns_it() -> None:
    plan = _fixture_plan()
    [link6] = [pl for pl in plan.disable if pl.a.port == 6]
    [event] = [e for e in link6.evidence if e.kind == "event"]
    assert event.code == 329 and event.condemns and "alone" in event.text  # gpu-r1-06 has one HCA that went down
    assert "counter" in link6.reason and "flapping" not in link6.reason  # 1 < host_flap_events (2)


def test_bad_input_is_set_apart_with_reasons_not_dropped() -> None:
    plan = _fixture_plan()
    reasons = " | ".join(r.reason for r in plan.set_apart)
    for expected in ("later than now", "truncated or garbled", "MANUAL", "gone-switch[3]: not a cabled port"):
        assert expected in reasons
    assert plan.summary["uncounted_codes"] == {1234: 1}
    assert [b.events for b in plan.bursts] == [60] and plan.summary["events_in_bursts"] == 60


def test_a_ufm_restart_of_ten_thousand_link_downs_plans_nothing() -> None:
    top = _topology()
    uplinks = [link for link in top.links if {link.a.guid, link.b.guid} == {LEAF, SPINE}]
    lines = []
    for i in range(10_000):
        link = uplinks[i % len(uplinks)]
        t = datetime(2026, 12, 1, 12, 0, tzinfo=UTC) + timedelta(milliseconds=i * 0.5)
        lines.append(f"{t:%Y-%m-%d %H:%M:%S.%f}"[:-3] + f" [{i}] [329] WARNING [Fabric_Topology] Link "
                     f"[Source {link.a.guid}_{link.a.port}  TO Dest: {link.b.guid}_{link.b.port}]: Link went down")
    plan = plan_ports(top, parse_event_log("\n".join(lines)).events, [], [], PortPolicy(), NOW)
    assert plan.disable == () and plan.watch == ()
    assert plan.summary["events_in_bursts"] == 10_000


def test_a_real_wave_over_the_caps_is_planned_but_needs_force() -> None:
    top = _topology()
    leaf_uplinks = [link for link in top.links if LEAF in (link.a.guid, link.b.guid)
                    and all(top.nodes[e.guid].type == "switch" for e in (link.a, link.b))]
    lines = [f"2026-12-01 1{i % 8}:0{i % 10}:00.000 [{i}] [329] WARNING [Fabric_Topology] Link "
             f"[Source {link.a.guid}_{link.a.port}  TO Dest: {link.b.guid}_{link.b.port}]: Link went down"
             for i, link in enumerate(leaf_uplinks[:8])]
    plan = plan_ports(top, parse_event_log("\n".join(lines)).events, [], [], PortPolicy(max_ports=10), NOW)
    assert len(plan.disable) == 8 and plan.needs_force
    reasons = plan.cap.reasons()
    assert reasons[0] == "16 ports to disable > the cap of 10 per run"
    total = len(leaf_uplinks)  # every switch-to-switch link of a leaf is an uplink
    assert f"8 of its {total} uplinks ({100 * 8 / total:.0f}% > 25%)" in reasons[1]


def test_events_before_the_window_count_for_nothing() -> None:
    plan = _fixture_plan(since=timedelta(hours=1))
    assert [pl.a.port for pl in plan.disable if any(e.kind == "event" for e in pl.evidence)] == []


def test_with_the_design_ends_get_physical_names_and_locations() -> None:
    design = load_design(REPO / "inventory" / "sim" / "fabric" / "design.yml")
    plan = _fixture_plan(design=design)
    [up] = [pl for pl in plan.disable if pl.a.port == 25]
    assert up.a.name == "leaf-A-r3-U40" and up.a.location is not None and up.a.location.u == 40
    assert up.b is not None and up.b.name.startswith("spine-")


def test_a_disabled_port_puts_its_link_apart() -> None:
    top = _topology()
    link = top.by_end[End(LEAF, 5)]
    line = (f"2026-12-01 10:00:00.000 [1] [110] WARNING [Hardware] IBPort [default / Switch: {Q} / NA / 5] "
            f"[dev_id: {LEAF}]: Symbol error counter rate threshold exceeded.")
    from fabric.findings import FEnd, Finding
    disabled = Finding("port_down", FEnd(LEAF, Q, 5), FEnd(link.other(End(LEAF, 5)).guid, None, 1), "LinkUp",
                       "Down/ Disabled", "re-enable once repaired")
    plan = plan_ports(top, parse_event_log(line).events, [], [disabled], PortPolicy(), NOW)
    assert plan.disable == () and [pl.a.port for pl in plan.already_disabled] == [5]
    # unless the ledger says an apply of ours stopped part way (apply_failed / job_timeout): finish it
    from fabric.ports.resolve import LinkEnd

    far = link.other(End(LEAF, 5))
    ends = (LinkEnd(LEAF, "leaf", 5, True), LinkEnd(far.guid, "far", far.port, True))
    why = "port ledger row 3: job_timeout (1 counted event(s) in the window)"
    again = plan_ports(top, parse_event_log(line).events, [], [disabled], PortPolicy(), NOW,
                       unfinished={End(e.guid, e.port): (ends, why) for e in ends})
    assert [(pl.a.name, pl.a.port) for pl in again.disable] == [("leaf", 5)] and again.already_disabled == ()
    assert again.disable[0].reason.endswith(f"(finishing what {why} left undone)")


def test_a_link_under_repair_is_shown_apart_with_its_new_events_not_planned_again() -> None:
    from fabric.ports.resolve import LinkEnd

    plain = _fixture_plan()
    [first] = [pl for pl in plain.disable if pl.a.guid == LEAF and pl.a.port == 25]
    ends = (LinkEnd(first.a.guid, first.a.name, first.a.port, True),
            LinkEnd(first.b.guid, first.b.name, first.b.port, True))  # type: ignore[union-attr]
    why = "port ledger row 7: disabled (2 counted event(s) in the window)"
    repair = {End(e.guid, e.port): (ends, why) for e in ends}
    plan = _fixture_plan(under_repair=repair)
    assert not [pl for pl in plan.disable if pl.a.guid == LEAF and pl.a.port == 25]
    [apart] = [pl for pl in plan.already_disabled if pl.a.guid == LEAF and pl.a.port == 25]
    assert apart.reason == f"under repair: {why}" and apart.evidence  # its events are filed under it
