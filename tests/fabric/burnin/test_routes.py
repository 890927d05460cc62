"""Forwarding tables read from dump_lfts / ibroute, and flow paths walked through them."""

from __future__ import annotations

import itertools

import pytest

from fabric.burnin.lft import parse_lfts
from fabric.burnin.routes import RoutingError, Unknown, flow_path
from fabric.errors import ParseError
from tests.fabric.burnin.helpers import sim_routing, text


def test_dump_lfts_gives_every_switch_a_complete_table() -> None:
    dump = parse_lfts(text("sim-site.ftree.dump_lfts.txt"))
    assert len(dump.switches) == 12 and not dump.truncated
    assert sorted({t.entries for t in dump.switches.values()}) == [138, 141] and len(dump.destinations) == 141
    assert dump.destinations[13].kind == "ca" and dump.destinations[13].description == "gpu-r1-01 mlx5_0"


def test_concatenated_ibroute_reads_the_same_tables_as_dump_lfts() -> None:
    a = parse_lfts(text("sim-site.updn.dump_lfts.txt"))
    b = parse_lfts(text("sim-site.updn.ibroute.txt"))
    assert {g: t.out_ports for g, t in a.switches.items()} == {g: t.out_ports for g, t in b.switches.items()}
    assert b.switches["0c42a10300000000"].where == "Lid 1"


def test_path_runs_uplink_then_switches_then_the_receivers_link() -> None:
    r = sim_routing()
    by = {h.name: h for h in r.hcas}
    path = flow_path(r, by["gpu-r1-01/mlx5_0"], by["gpu-r2-08/mlx5_7"])
    assert not isinstance(path, Unknown)
    assert path[0].kind == "hca-leaf" and path[-1].kind == "leaf-hca"
    assert path[0].tail == by["gpu-r1-01/mlx5_0"].end and path[-1].head == by["gpu-r2-08/mlx5_7"].end
    assert all(a.head.guid == b.tail.guid for a, b in itertools.pairwise(path))


def test_truncated_dump_makes_flows_unknown_never_wrong() -> None:
    full_text = text("sim-site.ftree.dump_lfts.txt")
    cut = full_text[: int(len(full_text) * 0.6)]  # mid-line, mid-table
    full, short = sim_routing(), sim_routing(lfts=cut)
    dump = parse_lfts(cut)
    assert len(dump.truncated) == 1 and len(dump.switches) < 12
    assert any("incomplete" in w for w in short.warnings)
    assert any("no table" in e.reason for e in short.excluded)
    good = {h.name: h for h in full.hcas}
    unknown = 0
    for src in short.hcas[::7]:
        for dst in short.hcas[::5]:
            if src.host == dst.host:
                continue
            path = flow_path(short, src, dst)
            if isinstance(path, Unknown):
                unknown += 1
                continue
            assert path == flow_path(full, good[src.name], good[dst.name])
    assert unknown > 0


def test_dump_of_another_fabric_is_a_clear_error() -> None:
    other = text("sim-site.ftree.dump_lfts.txt").replace("guid 0x0c42a103", "guid 0x0c42a1ff")
    with pytest.raises(RoutingError, match="different fabric"):
        sim_routing(lfts=other)


def test_dump_naming_other_hcas_is_a_clear_error() -> None:
    other = text("sim-site.ftree.dump_lfts.txt").replace("'gpu-r1-01 mlx5_0'", "'node-7 mlx5_0'")
    with pytest.raises(RoutingError, match="different fabric"):
        sim_routing(lfts=other)


def test_text_that_is_no_dump_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no forwarding table"):
        parse_lfts(text("sim-site.ibnetdiscover.txt"))
