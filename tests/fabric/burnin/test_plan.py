"""Stages planned from the embedded site's real ftree/updn tables, their proof, and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fabric.burnin.plan import BurninPlanError, Flow, make_plan, plan_loads, route_table
from fabric.burnin.render import plan_json
from fabric.burnin.routes import uplink_index
from fabric.cli import main as fabric_main
from tests.cli_run import run_cli
from tests.fabric.burnin.helpers import BURNIN, GPU_HOSTS, sim_routing


def test_ftree_on_the_gpu_hosts_burns_every_routed_link_in_two_stages_the_lower_bound() -> None:
    plan = make_plan(sim_routing("ftree", GPU_HOSTS))
    assert plan.lower_bound == 2 and len(plan.stages) == 2
    assert not plan.uncovered
    loads = plan_loads(plan)
    assert set(loads) == set(plan.routed)
    assert all(max(row) == 1 for row in loads.values())  # each routed link: one flow, in some stage
    # ftree routes no HCA traffic over some inter-switch links: listed, not counted as burned
    assert plan.not_routed and {plan.routing.links[i].kind for i in plan.not_routed} == {"switch-switch"}


@pytest.mark.parametrize("engine", ["ftree", "updn"])
def test_every_stage_keeps_one_flow_per_hca_and_never_pairs_a_host_with_itself(engine: str) -> None:
    plan = make_plan(sim_routing(engine, GPU_HOSTS))
    assert plan.stages and not plan.uncovered and len(plan.stages) >= plan.lower_bound
    for stage in plan.stages:
        assert len({f.src.end for f in stage}) == len(stage) == len({f.dst.end for f in stage})
        assert all(f.src.host != f.dst.host for f in stage)
        links = [i for f in stage for i in f.links]
        assert len(links) == len(set(links))


def test_a_receiver_with_links_of_its_own_raises_the_lower_bound() -> None:
    # No site: the controller's HCA takes part too, and ftree gives its LID down-links nobody else uses.
    plan = make_plan(sim_routing("ftree"))
    assert plan.lower_bound == 7 and "ctl-01/mlx5_0" in plan.bound_reason
    assert len(plan.stages) >= plan.lower_bound and not plan.uncovered


def test_a_plan_that_overloads_a_link_is_refused() -> None:
    plan = make_plan(sim_routing("ftree", GPU_HOSTS))
    r = plan.routing
    table, up = route_table(r), uplink_index(r)
    leaf, (s1, s2) = next((leaf, hs[:8:7]) for leaf, hs in table.senders.items() if len(hs) > 8)
    j1, j2 = next((j1, j2) for j1 in range(len(r.hcas)) for j2 in range(len(r.hcas))
                  if r.hcas[j1].host != r.hcas[j2].host and not {r.hcas[j1].host, r.hcas[j2].host} & {s1.host, s2.host}
                  and set(table.routes[j1][leaf][:-1]) & set(table.routes[j2][leaf][:-1]))
    both = (Flow(s1, r.hcas[j1], (up[s1.end], *table.routes[j1][leaf])),
            Flow(s2, r.hcas[j2], (up[s2.end], *table.routes[j2][leaf])))
    bad = replace(plan, stages=(both,))
    with pytest.raises(BurninPlanError, match="would put 2 flows on"):
        plan_loads(bad)  # two flows in one stage share an inter-switch link
    assert plan_loads(replace(plan, stages=(both[:1], both[1:])))  # one a stage is fine


def test_json_states_each_flow_with_port_guids_and_each_links_load_per_stage() -> None:
    doc = plan_json(make_plan(sim_routing("ftree", GPU_HOSTS)))
    flow = doc["stages"][0][0]
    assert flow["src"].startswith("0x") and flow["dst"].startswith("0x") and "/" in flow["src_name"]
    assert flow["links"][0].startswith(flow["src"][2:-1])  # uplink from the sender's node
    assert doc["lower_bound"] == doc["stages_needed"] == 2
    assert all(len(link["load"]) == 2 and max(link["load"]) == 1 for link in doc["links"])
    assert doc["not_routed"] and all("fix" in n for n in doc["not_routed"])


def _cli(*args: str) -> tuple[int, str, str]:
    result = run_cli(fabric_main, ["burnin", *args])
    return result.code, result.stdout, result.stderr


def test_cli_plans_from_saved_files_with_no_site() -> None:
    code, out, _ = _cli("plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"),
                        "--routing", str(BURNIN / "sim-site.ftree.dump_lfts.txt"), "--hosts", "gpu-*", "--json")
    assert code == 0
    doc = json.loads(out)
    assert len(doc["stages"]) == doc["lower_bound"] == 2 and doc["hcas"] == 128
    code, out, _ = _cli("plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"),
                        "--routing", str(BURNIN / "sim-site.updn.ibroute.txt"))
    assert code == 0 and out.startswith(f"{out.split()[0]} stages for ") and "ctl-01/mlx5_0" in out


@pytest.mark.parametrize(("routing", "message"), [
    ("missing.txt", "cannot read"),
    ("sim-site.ibnetdiscover.txt", "no forwarding table"),
])
def test_cli_errors_are_one_line_and_exit_1(routing: str, message: str) -> None:
    code, out, err = _cli("plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"),
                          "--routing", str(BURNIN / routing))
    assert code == 1 and out == "" and message in err and err.count("\n") == 1


def test_cli_hosts_glob_matching_nothing_is_an_error() -> None:
    code, _, err = _cli("plan", "--discovered", str(BURNIN / "sim-site.ibnetdiscover.txt"),
                        "--routing", str(BURNIN / "sim-site.ftree.dump_lfts.txt"), "--hosts", "nope-*")
    assert code == 1 and "matches --hosts" in err
