"""The judge on a small hand-made plan: direct evidence first, the slow-flow cover, unknown kept apart."""

from __future__ import annotations

from typing import Any

from fabric.burnin.history import FlowRow, PortRow
from fabric.burnin.judge import FAIL, NOT_COVERED, PASS, UNKNOWN, judge, port_evidence


def _link(name: str, kind: str = "switch-switch", rate: float = 200.0) -> dict[str, Any]:
    return {"link": name, "name": name.replace("->", " -> "), "kind": kind, "ends": name.split("->"),
            "trained_gbps": rate}


# hosts a, b, c; leaf L, spines S and T: a->c crosses a-up, L->S, S->L, c-down; b->c crosses L->T instead
LINKS = ["a1[1]->L[1]", "b1[1]->L[2]", "L[3]->c1[1]", "L[4]->S[1]", "S[1]->L[5]", "L[6]->T[1]", "T[1]->L[7]"]
FLOWS = {("a", "c"): ["a1[1]->L[1]", "L[4]->S[1]", "S[1]->L[5]", "L[3]->c1[1]"],
         ("b", "c"): ["b1[1]->L[2]", "L[6]->T[1]", "T[1]->L[7]", "L[3]->c1[1]"]}


def _plan() -> dict[str, Any]:
    kinds = {"a1[1]->L[1]": "hca-leaf", "b1[1]->L[2]": "hca-leaf", "L[3]->c1[1]": "leaf-hca"}
    return {"floor_gbps": 180.0, "links": [_link(n, kinds.get(n, "switch-switch")) for n in LINKS],
            "stages": [[{"src": "a", "dst": "c", "links": FLOWS["a", "c"]}],
                       [{"src": "b", "dst": "c", "links": FLOWS["b", "c"]}]], "not_routed": []}


def _flow(stage: int, src: str, gbps: float | None, reason: str = "") -> FlowRow:
    return FlowRow(stage, src, "c", f"{src}/mlx5_0", "c/mlx5_0", gbps, "ok" if gbps is not None else "unknown", reason)


def test_the_second_stage_clears_the_shared_links_and_condemns_the_spine_link_alone() -> None:
    j = judge(_plan(), [_flow(1, "a", 110.0), _flow(2, "b", 196.0)], [])
    verdicts = {v.link: v.verdict for v in j.links}
    assert verdicts["L[3]->c1[1]"] == PASS  # the fast flow crossed it
    # a's uplink and both spine S directions only carried the slow flow: indistinguishable, condemned together
    assert {k for k, v in verdicts.items() if v == FAIL} == {"a1[1]->L[1]", "L[4]->S[1]", "S[1]->L[5]"}
    assert len(port_evidence(j)) == 3 and all(e.source == "burnin" for e in port_evidence(j))


def test_counters_name_the_link_directly_and_exonerate_the_rest() -> None:
    ports = [PortRow(1, "S", 1, "symbol_errors", 40, "ok", "")]
    j = judge(_plan(), [_flow(1, "a", 110.0), _flow(2, "b", 196.0)], ports)
    assert {v.link for v in j.failing()} == {"L[4]->S[1]", "S[1]->L[5]"}
    assert {v.link: v.verdict for v in j.links}["a1[1]->L[1]"] == NOT_COVERED  # only the slowed flow reached it


def test_unknown_flows_never_pass_a_link_and_hosts_are_judged_by_their_hca_links() -> None:
    j = judge(_plan(), [_flow(1, "a", None, "receiver c: ib_write_bw was killed"), _flow(2, "b", 196.0)], [])
    verdicts = {v.link: v.verdict for v in j.links}
    assert verdicts["a1[1]->L[1]"] == UNKNOWN and verdicts["L[4]->S[1]"] == UNKNOWN
    assert not j.failing()
    hosts = {h.host: h.verdict for h in j.hosts}
    assert hosts["a1[1]"] == UNKNOWN and hosts["b1[1]"] == PASS


def test_a_link_trained_below_the_floor_fails_without_any_flow() -> None:
    plan = _plan()
    plan["links"][5]["trained_gbps"] = 50.0
    j = judge(plan, [_flow(1, "a", 196.0), _flow(2, "b", 49.0)], [])
    assert [v.link for v in j.failing()] == ["L[6]->T[1]"] and "below the floor" in j.failing()[0].reason
