"""The lower bound and its witness on hand-made fabrics whose optimum is known, and the plan reaching it.

Each witness is re-derived here from the tables, independently of `fabric.burnin.reach`: every flow's path
walked with `flow_path`, the HCAs whose flows cross the witness links collected, and the count checked
(`len(links) > (bound - 1) * len(hcas)`: one fewer stage cannot cover them)."""

from __future__ import annotations

import pytest

from fabric.burnin.bound import hall
from fabric.burnin.plan import Plan, make_plan, plan_loads
from fabric.burnin.render import plan_json, plan_text
from fabric.burnin.routes import Routing, Unknown, flow_path, uplink_index
from tests.fabric.burnin.helpers import GPU_HOSTS, sim_routing
from tests.fabric.burnin.tiny import tiny_routing

SPINES = ["S1", "S2", "S3"]


def _two_leaves(receivers: int) -> Routing:
    """One sender alone on L1; `receivers` HCAs of other hosts on L2; three spines; minhop-like tables
    that send each receiver's LID up its own spine from L1."""
    hcas = [("a-01 mlx5_0", "L1", 1)] + [(f"b-{k:02d} mlx5_0", "L2", k) for k in range(1, receivers + 1)]
    cables = [(leaf, 10 + k, s, 1 + (leaf == "L2")) for k, s in enumerate(SPINES) for leaf in ("L1", "L2")]
    return tiny_routing(["L1", "L2", *SPINES], hcas, cables)


def _lone_receiver(order: tuple[str, ...] = ("L1", "L3", "L4", "L2")) -> Routing:
    """b-01 alone on L2; three leaves of senders, each sending every LID up a spine of its own."""
    switches = [*order, *SPINES]
    index = {s: i for i, s in enumerate(switches)}
    hcas = [(f"{h}-{n:02d} mlx5_0", leaf, n) for h, leaf in (("a", "L1"), ("c", "L3"), ("d", "L4")) for n in (1, 2)]
    hcas.append(("b-01 mlx5_0", "L2", 1))
    cables = [(leaf, 10 + k, s, 1 + i) for k, s in enumerate(SPINES) for i, leaf in enumerate(["L1", "L2", "L3", "L4"])]
    return tiny_routing(switches, hcas, cables, pick=lambda s, lid, ports: ports[index[s] % len(ports)])


def rederive(plan: Plan) -> None:
    """The witness checked against every flow's path through the tables."""
    w, r = plan.witness, plan.routing
    assert w is not None
    hcas = {r.hcas[i].end for i in w.hcas}
    links = {r.links[i] for i in w.links}
    up = uplink_index(r)
    for src in r.hcas:
        for dst in r.hcas:
            if src.host == dst.host:
                continue
            path = flow_path(r, src, dst, up)
            if isinstance(path, Unknown) or not links & set(path):
                continue
            crossed = len(links & set(path))
            if w.kind in ("into", "own"):
                assert dst.end in hcas and crossed == 1, (src.name, dst.name)
            elif w.kind in ("out_of", "from"):
                assert src.end in hcas and crossed == 1, (src.name, dst.name)
    assert len(links) > (plan.lower_bound - 1) * len(hcas)


def test_a_lone_sender_with_three_routed_uplinks_needs_three_stages_and_gets_them() -> None:
    plan = make_plan(_two_leaves(3))
    assert plan.lower_bound == len(plan.stages) == 3 and not plan.forced and not plan.uncovered
    assert plan.witness is not None and plan.witness.kind == "out_of"
    assert "3 routed links out of L1" in plan.bound_reason and "a-01/mlx5_0" in plan.bound_reason
    assert max(max(row) for row in plan_loads(plan).values()) == 1
    rederive(plan)


def test_a_receiver_alone_on_its_leaf_routed_over_three_spines_needs_three_stages() -> None:
    plan = make_plan(_lone_receiver())
    assert plan.lower_bound == len(plan.stages) == 3 and not plan.uncovered
    assert plan.witness is not None and [plan.routing.hcas[i].name for i in plan.witness.hcas] == ["b-01/mlx5_0"]
    plan_loads(plan)
    rederive(plan)


def test_a_lone_sender_routed_down_one_spine_to_three_leaves_needs_three_stages() -> None:
    # L1 and L4 both send up S1, so b-01 alone on L2 sends over S2 to L1, L3 and L4: links no other leaf's
    # route crosses, each to other receivers, so no flow crosses two: three flows, three stages (no pod
    # bound sees it: they lie outside L2 and every pod above it is crossed)
    plan = make_plan(_lone_receiver(("L1", "L2", "L3", "L4")))
    assert plan.lower_bound == len(plan.stages) == 3 and not plan.forced and not plan.uncovered
    assert plan.witness is not None and plan.witness.kind == "from"
    assert "only L2's sender b-01/mlx5_0 sends over" in plan.bound_reason and "S2[1] -> L1[11]" in plan.bound_reason
    rederive(plan)


def test_a_plan_short_of_its_bound_names_the_links_that_forced_the_extra_stage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the lone sender's bound left out, the bound says 2 and the third stage is forced by S2's links
    monkeypatch.setattr("fabric.burnin.bound.lone_sender_bound", lambda r, floor: (0, (), (), -1))
    plan = make_plan(_lone_receiver(("L1", "L2", "L3", "L4")))
    assert (plan.lower_bound, len(plan.stages)) == (2, 3) and plan.forced and not plan.uncovered
    doc = plan_json(plan)
    assert doc["at_lower_bound"] is False and doc["forced_extra_stages"]
    assert all(e["link"] in {x["link"] for x in doc["links"]} for e in doc["forced_extra_stages"])
    assert "did not fit in 2 stages" in plan_text(plan)


@pytest.mark.parametrize(("engine", "hosts"), [("ftree", GPU_HOSTS), ("updn", GPU_HOSTS), ("ftree", None)])
def test_the_sim_sites_witness_holds_against_every_path(engine: str, hosts: set[str] | None) -> None:
    plan = make_plan(sim_routing(engine, hosts))
    assert len(plan.stages) == plan.lower_bound
    rederive(plan)


def test_hall_counts_links_only_few_receivers_can_take() -> None:
    # four links, two receivers: counting says 2 stages; but three links are receiver 7's alone
    users = {1: [7], 2: [7], 3: [7], 4: [7, 8]}
    assert hall([1, 2, 3, 4], users) == (3, (1, 2, 3), (7,))
    need, links, receivers = hall([1, 2, 3, 4], {1: [7], 2: [8], 3: [7, 8], 4: [8]})
    assert need == 2 and len(links) > len(receivers) and set(receivers) <= {7, 8}  # one stage is short
    assert hall([1], {1: [7]})[0] == 1


def test_hall_grows_the_matching_across_receivers() -> None:
    # 5 links, receivers 1..3; a greedy assignment that fills receiver 1 first must be undone
    users = {10: [1, 2], 11: [1, 3], 12: [1], 13: [2, 3], 14: [3]}
    need, links, receivers = hall(list(users), users)
    assert need == 2 and len(links) > len(receivers)  # the witness: more links than one stage's receivers
    assert all(set(users[lk]) <= set(receivers) for lk in links)
