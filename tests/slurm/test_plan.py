"""The sync's pure parts: Slurm's JSON read strictly, where a node stands, what is done to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.slurm.errors import SlurmAnswerInvalid
from provision.slurm.nodes import SlurmNode, parse_sinfo_json
from provision.slurm.plan import Action, HostView, Standing, plan_sync, standing
from provision.slurm.reasons import Owner, parse_reason, sync_reason
from provision.slurm.sync import host_views
from provision.state import StateStore
from provision.state.intents import Ask, Outcome, begin_in, close
from provision.state.lifecycle import State
from tools.slurm_health_check import drain_reason


def node(name: str = "n1", state: str = "idle", flags: tuple[str, ...] = (), reason: str = "",
         user: str | None = None) -> SlurmNode:
    return SlurmNode(name, state, frozenset(flags), reason, user, None, ("gpu",))


@pytest.mark.parametrize(("n", "where"), [
    (node(), Standing.available),
    (node(flags=("DRAIN",), reason="bringup: xid_79 (2026-12-05 03:12)"), Standing.drained),
    (node(flags=("DRAIN",), reason="bringup-check: xid_79 (2026-12-05 03:12) gpu_xid: Xid 79"),
     Standing.health_check_drained),
    (node(flags=("DRAIN",), reason="PSU swap", user="alice"), Standing.admin_drained),
    (node(state="down", reason="rack power work", user="alice"), Standing.admin_drained),
    # Slurm's own: it lost the slurmd (DOWN + NOT_RESPONDING, reason "Not responding" set by SlurmUser)
    (node(state="down", flags=("NOT_RESPONDING",), reason="Not responding", user="slurm"), Standing.not_responding),
    (node(flags=("NOT_RESPONDING",)), Standing.not_responding),
    (node(state="unknown"), Standing.not_responding),  # never registered
    (node(state="down", flags=("DRAIN", "NOT_RESPONDING"), reason="bringup: x (2026-12-05 03:12)"), Standing.drained),
    (None, Standing.missing),
])
def test_where_a_node_stands(n: SlurmNode | None, where: Standing) -> None:
    assert standing(n) is where


def test_a_down_golden_node_slurm_lost_is_unknown_and_left_alone() -> None:
    host = HostView("n1", State.golden, None, 0.0)
    plan = plan_sync([host], [node(state="down", flags=("NOT_RESPONDING",), reason="Not responding", user="slurm")],
                     on_leave="drain")
    assert plan.decisions[0].action is Action.none and "unknown" in plan.decisions[0].note


def test_on_leave_down_kills_jobs_and_the_reason_names_the_failure_and_its_minute() -> None:
    host = HostView("n1", State.failed, "xid_79", 1796521920.0)
    plan = plan_sync([host], [node(state="allocated")], on_leave="down")
    d = plan.decisions[0]
    assert d.action is Action.down and d.reason == "bringup: xid_79 (2026-12-06 01:52)"
    assert sync_reason(None, "healthy", 1796521920.0) == "bringup: not golden: healthy (2026-12-06 01:52)"


def test_the_health_checks_reason_is_the_shape_the_sync_reads_back() -> None:
    report = {"verdict": "critical", "checks": [
        {"check": "gpu_ecc", "status": "ok", "reason": "", "summary": "fine"},
        {"check": "gpu_xid", "status": "critical", "reason": "xid_79", "summary": "Xid 79 on GPU 1\n\x1b[2Jboom"}]}
    reason = drain_reason(report, 1796521920.0)
    assert reason is not None and "\n" not in reason and "\x1b" not in reason
    parsed = parse_reason(reason)
    assert parsed.owner is Owner.check and parsed.code == "xid_79" and parsed.detail.startswith("gpu_xid: Xid 79")
    assert drain_reason({"verdict": "unknown"}, 0.0) is None and drain_reason({"verdict": "unhealthy"}, 0.0) is None


@pytest.mark.parametrize("text", [
    "not json", "[]", json.dumps({"nodes": {}}), "[" * 200_000 + "]" * 200_000,
    json.dumps({"errors": [{"error": "Unable to contact slurm controller"}], "nodes": []}),
    json.dumps({"nodes": [{"name": 7}]}), json.dumps({"nodes": [{"state": "idle"}]}),
    json.dumps({"nodes": [{"name": "n", "state": "idle", "state_flags": "DRAIN"}]}),
])
def test_an_answer_that_is_not_what_sinfo_documents_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(SlurmAnswerInvalid) as caught:
        parse_sinfo_json(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


def test_hostile_text_in_a_node_is_escaped() -> None:
    raw = {"name": "n1", "state": "IDLE", "state_flags": ["DRAIN"], "reason": "a\nb\x1b]0;x\x07" + "y" * 2000,
           "reason_set_by_user": "ev\x1bil", "reason_changed_at": 5, "partitions": ["gpu"]}
    (n,) = parse_sinfo_json(json.dumps({"nodes": [raw]}))
    assert n.reason.startswith("a\\nb\\x1b]0;x\\x07") and len(n.reason) <= 512 and "\x1b" not in n.reason_user
    assert n.state == "idle" and n.display() == "IDLE+DRAIN"


def test_a_golden_host_with_a_change_in_flight_is_drained_and_resumed_once_it_is_recorded() -> None:
    asked = "a change is in flight: bmc reset ForceOff (Off) asked by `power cycle`, not recorded yet"
    flying = HostView("n1", State.golden, None, 1796521920.0, in_flight=asked)
    d = plan_sync([flying], [node(state="allocated")], on_leave="drain").decisions[0]
    assert d.action is Action.drain and d.reason is not None and d.reason.startswith("bringup: change_in_flight (")
    assert "golden, but a change is in flight" in d.note
    drained = node(flags=("DRAIN",), reason=d.reason)
    assert plan_sync([flying], [drained], on_leave="drain").decisions[0].action is Action.none
    recorded = HostView("n1", State.golden, None, 1796521920.0)
    assert plan_sync([recorded], [drained], on_leave="drain").decisions[0].action is Action.resume


def test_the_syncs_host_views_carry_each_hosts_open_intents(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("n1", "r1"), ("n2", "r1")])
    for name in ("n1", "n2"):
        store.mark(name, State.golden, reason="test")
    with store.transaction() as db:
        asked = begin_in(db, Ask("n2", "bmc", "https://bmc", "reset ForceOff", "Off", "power cycle"))
    views = {v.name: v for v in host_views(store, ["n1", "n2"])}
    assert views["n1"].in_flight == "" and "reset ForceOff (Off) asked by `power cycle`" in views["n2"].in_flight
    with store.transaction() as db:
        close(db, [asked], Outcome.confirmed, {"power_state": "Off"})
    assert host_views(store, ["n2"])[0].in_flight == ""
