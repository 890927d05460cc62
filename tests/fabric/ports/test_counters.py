"""Port counters from the real perfquery / ibqueryerrors run against ibsim, and their rates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.counters import (
    CounterSweep,
    counter_rates,
    parse_counters,
    parse_ibqueryerrors,
    parse_perfquery,
    resolve_lids,
)
from fabric.topology import End
from tests.fabric.ports.helpers import IBSIM, LEAF


def _sweep(name: str) -> CounterSweep:
    return parse_counters((IBSIM / name).read_text(), name)


def test_perfquery_sweep_reads_basic_and_extended_blocks_by_lid_with_its_time() -> None:
    sweep = _sweep("perfquery-before.txt")
    assert sweep.by_lid and sweep.complete and not sweep.rejected
    assert sweep.taken_at == datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
    assert sweep.values[End("lid-1", 5)]["symbol_errors"] == 40
    assert sweep.values[End("lid-1", 6)]["link_downed"] == 3


def test_perfquery_lids_map_to_guids_through_the_discovered_fabric() -> None:
    topology = parse_ibnetdiscover((IBSIM / "ibnetdiscover.txt").read_text())
    swept, lost = resolve_lids(_sweep("perfquery-after.txt"), topology)
    assert not lost
    assert swept.values[End(LEAF, 7)]["rcv_errors"] == 500


def test_a_lid_the_fabric_does_not_have_is_set_apart() -> None:
    topology = parse_ibnetdiscover((IBSIM / "ibnetdiscover.txt").read_text())
    text = "# Port counters: Lid 4000 port 1 (CapMask: 0x1300)\nSymbolErrorCounter:..............9\n"
    _swept, lost = resolve_lids(parse_perfquery(text), topology)
    assert "LID 4000" in lost[0].reason


def test_two_sweeps_give_rates_per_hour_and_a_reset_is_not_a_negative_rate() -> None:
    topology = parse_ibnetdiscover((IBSIM / "ibnetdiscover.txt").read_text())
    before, _ = resolve_lids(_sweep("perfquery-before.txt"), topology)
    after, _ = resolve_lids(_sweep("perfquery-after.txt"), topology)
    rates = {(r.end.port, r.counter): r for r in counter_rates(before, after) if r.end.guid == LEAF
             and r.counter in {"symbol_errors", "link_downed", "rcv_errors"}}
    assert rates[(5, "symbol_errors")].per_hour == pytest.approx(860.0)
    assert rates[(6, "link_downed")].per_hour == pytest.approx(6.0)
    assert rates[(7, "rcv_errors")].per_hour == pytest.approx(500.0)
    reset = rates[(8, "symbol_errors")]
    assert reset.reset and reset.per_hour is None and "reset" in reset.describe()


def test_old_errors_alone_give_no_rate() -> None:
    before = _sweep("ibqueryerrors-before.txt")
    same = parse_ibqueryerrors("2026-12-01T19:00:00+00:00\n" + (IBSIM / "ibqueryerrors-before.txt").read_text())
    assert before.values[End(LEAF, 8)]["symbol_errors"] == 70
    assert counter_rates(parse_ibqueryerrors("2026-12-01T18:00:00+00:00\n" +
                                             (IBSIM / "ibqueryerrors-before.txt").read_text()), same) == ()


def test_ibqueryerrors_names_ports_by_guid_and_skips_the_node_total() -> None:
    sweep = _sweep("ibqueryerrors-after.txt")
    assert not sweep.by_lid and not sweep.complete and sweep.taken_at is None
    assert set(sweep.values) == {End(LEAF, p) for p in (5, 6, 7, 8)}
    assert sweep.values[End(LEAF, 7)] == {"rcv_errors": 500}


def test_garbled_counter_lines_are_rejected_with_their_line() -> None:
    sweep = parse_ibqueryerrors("Errors for 0x1 \"x\"\n   GUID 0x0c42 port 3: [SymbolErrorCounter == 4]\n%%garbage\n")
    assert [(r.line, r.reason.split(" (")[0]) for r in sweep.rejected] == [(3, "not an ibqueryerrors line")]
