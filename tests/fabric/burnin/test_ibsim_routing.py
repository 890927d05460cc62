"""The real opensm programs the simulated site's switches; dump_lfts reads them; paths match ibtracert."""

from __future__ import annotations

import re

import pytest

from fabric.burnin.lft import parse_lfts
from fabric.burnin.plan import make_plan
from fabric.burnin.routes import Unknown, build_routing, flow_path
from fabric.design import Design
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from sim.ibfabric import IbFabric
from sim.ibfabric.routing import dump_lfts, ibtracert, route
from tests.fabric.burnin.helpers import GPU_HOSTS

pytestmark = pytest.mark.tools("ibsim", "opensm", "dump_lfts", "ibtracert")

_HOP = re.compile(r"^\[(\d+)\] -> (?:switch|ca) port \{0x([0-9a-f]+)\}\[(\d+)\]")


def _tracert_hops(text: str) -> list[tuple[int, int]]:
    """(out-port, in-port) of every hop ibtracert prints."""
    return [(int(m.group(1)), int(m.group(3))) for line in text.splitlines() if (m := _HOP.match(line.strip()))]


def test_real_opensm_ftree_tables_plan_two_stages_and_paths_match_ibtracert(sim_design: Design) -> None:
    with IbFabric(sim_design) as fabric:
        route(fabric, "ftree")
        top = parse_ibnetdiscover(fabric.discover())
        routing = build_routing(top, parse_lfts(dump_lfts(fabric)), GPU_HOSTS)
        plan = make_plan(routing)
        assert len(plan.stages) == plan.lower_bound == 2 and not plan.uncovered
        hcas = routing.hcas
        pairs = [(hcas[i], hcas[(i * 37 + 11) % len(hcas)]) for i in range(0, len(hcas), 13)]
        checked = 0
        for src, dst in pairs:
            if src.host == dst.host:
                continue
            path = flow_path(routing, src, dst)
            assert not isinstance(path, Unknown)
            assert [(lk.tail.port, lk.head.port) for lk in path] == _tracert_hops(ibtracert(fabric, src.lid, dst.lid))
            checked += 1
        assert checked >= 8
