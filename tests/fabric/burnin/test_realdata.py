"""Burn-in at the optimum on real fabrics: the captures in ../shared/realdata/1_infiniband/, run in ibsim and
routed by the real `opensm -R ftree` (which falls back to minhop on both), planned from `dump_lfts`.

The routed tables (227 MB for Selene) are cached outside git by `tests/fabric/burnin/realfabrics.py`; the
session fixtures here build the cache when it is absent (ibsim + opensm + dump_lfts: Selene about 25 s on 2
idle cores, the DGX H100 capture 2 s, once per machine and capture), so a clean clone runs these tests; they
skip, saying so, only when ../shared/realdata is not there. Selene's take ~8 s on 2 idle cores once cached
(parse 1 s, two plans of 4,000 HCAs): the fabric the issue (#41) is about, the only 3-tier one there is.

Every plan is checked independently of the planner: `plan_loads` follows each flow through the tables
and counts flows per directed link per stage; each witness is re-derived from the tables themselves.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import pytest

from fabric.burnin.engine import parse_opensm_log
from fabric.burnin.lft import LftDump, parse_lfts
from fabric.burnin.plan import Plan, make_plan, plan_loads
from fabric.burnin.render import plan_json
from fabric.burnin.routes import Unknown, build_routing, route_from
from fabric.identify import ca_name_from_description
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.topology import NodeType, Topology
from tests.fabric.burnin.realfabrics import CAPTURES, Routed, capture_path, routed

pytestmark = pytest.mark.tools("ibsim", "opensm")  # to build the cache when it is absent


@dataclass(frozen=True)
class Loaded:
    routed: Routed
    top: Topology
    dump: LftDump


def _load(name: str) -> Loaded:
    if capture_path(name) is None:
        pytest.skip(f"real capture {CAPTURES[name][0]} not present (../shared/realdata is not checked out here)")
    got = routed(name, "ftree")  # built here when the cache lacks it
    assert got is not None
    return Loaded(got, parse_ibnetdiscover(got.discovered.read_text()), parse_lfts(got.lfts.read_bytes()))


@pytest.fixture(scope="session")
def selene() -> Loaded:
    return _load("selene")


@pytest.fixture(scope="session")
def dgx_h100() -> Loaded:
    return _load("dgx-h100")


def _plan(got: Loaded, gpu_only: bool) -> Plan:
    hosts = None
    if gpu_only:
        labels = {lb.split("/", 1)[0] for n in got.top.nodes.values()
                  if n.type is not NodeType.SWITCH and (lb := ca_name_from_description(n.description))}
        hosts = {h for h in labels if fnmatch.fnmatchcase(h, got.routed.gpu_hosts)}
    plan = make_plan(build_routing(got.top, got.dump, hosts))
    loads = plan_loads(plan)  # every flow walked through the tables again: at most one a link a stage
    assert set(loads) == set(plan.routed) and all(max(row) == 1 for row in loads.values())
    assert not plan.uncovered
    return plan


def _forwarded_into(plan: Plan) -> None:
    """An `into` witness from the tables alone: of the HCAs whose LID a witness link's switch forwards out
    of that link, those that are not witness receivers are reached over it by no sender's route (walked
    from every sending leaf), and one fewer stage has too few receiver slots."""
    w, r = plan.witness, plan.routing
    assert w is not None and w.kind == "into"
    receivers = {r.hcas[i].end for i in w.hcas}
    links = set(w.links)
    forwarded = set()
    for i in w.links:
        link = r.links[i]
        table = r.tables[r.switch_index[link.tail.guid]]
        assert table is not None
        forwarded |= {h for h in r.hcas if table[h.lid] == link.tail.port}
    leaves = {r.switch_index[h.leaf.guid] for h in r.hcas}
    for dst in forwarded:
        if dst.end in receivers:
            continue
        memo: dict[int, tuple[int, ...] | Unknown] = {}
        for leaf in leaves:
            route = route_from(r, leaf, dst, memo)
            assert isinstance(route, Unknown) or not links & set(route), dst.name
    assert len(w.links) > (plan.lower_bound - 1) * len(receivers)


def test_selene_gpu_hosts_three_stages_at_the_bound_of_a_half_populated_rail_plane(selene: Loaded) -> None:
    plan = _plan(selene, gpu_only=True)
    assert plan.lower_bound == len(plan.stages) == 3 and not plan.forced
    assert "2 stages cannot cover" in plan.bound_reason and "69 receivers" in plan.bound_reason
    _forwarded_into(plan)


def test_selene_all_hcas_seven_stages_at_the_bound_of_a_service_leaf(selene: Loaded) -> None:
    plan = _plan(selene, gpu_only=False)
    assert plan.lower_bound == len(plan.stages) == 7 and not plan.forced
    w, r = plan.witness, plan.routing
    assert w is not None and w.kind == "out_of" and len(w.hcas) == 2 and len(w.links) == 14
    pod = {r.switch_guids[x] for x in w.switches}
    # the senders are exactly the taking-part HCAs cabled to the pod; every witness link leaves it
    assert {r.hcas[i].end for i in w.hcas} == {h.end for h in r.hcas if h.leaf.guid in pod}
    assert all(r.links[i].tail.guid in pod and r.links[i].head.guid not in pod for i in w.links)


def test_selene_tables_are_minhops_and_the_plan_warns_that_ftree_fell_back(selene: Loaded) -> None:
    got = selene
    engine = parse_opensm_log(got.routed.opensm_log.read_text())
    assert engine.fell_back and engine.used == "minhop"
    doc = plan_json(make_plan(build_routing(got.top, got.dump, {"luna-0001", "luna-0002", "luna-0355"})), engine)
    assert doc["routing_engine"]["fell_back"] and "fell back to minhop" in doc["warnings"][0]


@pytest.mark.parametrize(("gpu_only", "stages"), [(True, 3), (False, 2)])
def test_dgx_h100_superpod_at_its_bound(dgx_h100: Loaded, gpu_only: bool, stages: int) -> None:
    plan = _plan(dgx_h100, gpu_only)
    assert plan.lower_bound == len(plan.stages) == stages and not plan.forced
    if plan.witness is not None and plan.witness.kind == "into":
        _forwarded_into(plan)
