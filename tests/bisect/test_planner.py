"""The bisection planners, driven against simulated jobs that fail when a bad host takes part."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provision.bisect.planner import AdaptivePlanner, BisectPlanError, GridPlanner, Planner, simulate, split
from provision.bisect.planner import Test as PlannedTest


def _hosts(n: int) -> list[str]:
    return [f"gpu-{i:03d}" for i in range(1, n + 1)]


def test_imbue_grid_on_48_hosts_is_six_groups_of_eight_then_eight_groups_of_six() -> None:
    planner = GridPlanner(_hosts(48))
    rows = planner.next_round()
    assert [len(t.hosts) for t in rows] == [8] * 6
    planner.record({t.id: "gpu-011" not in t.hosts for t in rows})
    cols = planner.next_round()
    assert [len(t.hosts) for t in cols] == [6] * 8
    planner.record({t.id: "gpu-011" not in t.hosts for t in cols})
    assert planner.next_round() == []
    finding = planner.finding()
    assert finding.culprits == ("gpu-011",)
    assert (finding.runs, finding.rounds) == (14, 2)


def test_imbue_grid_resolves_two_bad_hosts_in_different_rows_and_columns_with_a_third_round() -> None:
    result = simulate(GridPlanner(_hosts(48)), {"gpu-001", "gpu-048"})
    assert result.correct
    assert result.finding.rounds == 3
    assert result.finding.runs == 14 + 4  # four candidates at the crossings


@pytest.mark.parametrize("n", [48, 512])
@pytest.mark.parametrize("d", [1, 2])
def test_adaptive_planner_finds_every_bad_host(n: int, d: int) -> None:
    rng = random.Random(n * 10 + d)
    hosts = _hosts(n)
    for _ in range(25):
        bad = set(rng.sample(hosts, d))
        result = simulate(AdaptivePlanner(hosts), bad)
        assert result.correct, (bad, result.finding)
        assert not result.finding.unexplained


@pytest.mark.parametrize("n", [48, 512])
def test_adaptive_planner_needs_fewer_runs_than_the_grid_for_one_bad_host(n: int) -> None:
    hosts = _hosts(n)
    for bad in (hosts[0], hosts[n // 2], hosts[-1]):
        adaptive = simulate(AdaptivePlanner(hosts, target_rounds=3), {bad}).finding
        grid = simulate(GridPlanner(hosts), {bad}).finding
        assert adaptive.runs < grid.runs
        assert adaptive.rounds == 3


def test_more_rounds_buy_fewer_runs() -> None:
    hosts = _hosts(512)
    runs = [simulate(AdaptivePlanner(hosts, target_rounds=r), {"gpu-300"}).finding.runs for r in (2, 3, 5)]
    assert runs[0] > runs[1] > runs[2]


def test_a_single_host_is_never_blamed_by_inference_alone() -> None:
    # Every culprit must have failed a job of its own (itself plus cleared hosts).
    hosts = _hosts(48)
    planner = AdaptivePlanner(hosts)
    solo_failures: set[str] = set()
    while tests := planner.next_round():
        results = {t.id: "gpu-048" not in t.hosts for t in tests}
        solo_failures |= {t.suspects[0] for t in tests if len(t.suspects) == 1 and not results[t.id]}
        planner.record(results)
    assert planner.finding().culprits == ("gpu-048",)
    assert solo_failures == {"gpu-048"}


def test_a_failure_only_at_full_scale_is_unexplained_not_blamed() -> None:
    # e.g. a switch that only drops packets under the whole group's load: every smaller job passes.
    hosts = _hosts(16)
    planner = AdaptivePlanner(hosts)
    while tests := planner.next_round():
        planner.record({t.id: len(t.hosts) < 16 for t in tests})
    finding = planner.finding()
    assert finding.culprits == ()
    assert finding.unexplained == (tuple(hosts),)


def test_a_group_too_small_to_pad_is_left_undecided() -> None:
    planner = AdaptivePlanner(_hosts(3), min_hosts=2)
    while tests := planner.next_round():
        planner.record({t.id: False for t in tests})
    finding = planner.finding()
    assert finding.culprits == ()
    assert finding.undecided == tuple(_hosts(3))


def test_results_must_match_the_handed_out_tests() -> None:
    planner = AdaptivePlanner(_hosts(8))
    tests = planner.next_round()
    with pytest.raises(BisectPlanError, match="not handed out"):
        planner.record({999: True})
    with pytest.raises(BisectPlanError, match="no result"):
        planner.record({tests[0].id: True} if len(tests) > 1 else {})


@pytest.mark.parametrize(("hosts", "message"), [(["a"], "cannot be bisected"), (["a", "a", "b"], "more than once")])
def test_bad_groups_are_refused(hosts: list[str], message: str) -> None:
    with pytest.raises(BisectPlanError, match=message):
        AdaptivePlanner(hosts)


def test_split_is_balanced_and_keeps_order() -> None:
    assert split(list("abcdefg"), 3) == [("a", "b", "c"), ("d", "e"), ("f", "g")]
    assert split(list("ab"), 5) == [("a",), ("b",)]


def _drive(planner: Planner, bad: set[str], min_hosts: int) -> None:
    cleared: set[str] = set()
    while tests := planner.next_round():
        seen: set[str] = set()
        for test in tests:
            assert not seen & set(test.hosts), "a host is in two jobs of one round"
            seen |= set(test.hosts)
            assert len(test.hosts) >= min_hosts
            assert set(test.padding) <= cleared, "padding must be hosts already cleared"
        results = {t.id: not set(t.hosts) & bad for t in tests}
        cleared |= {h for t in tests if results[t.id] for h in t.suspects}
        planner.record(results)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=4, max_value=120),
    min_hosts=st.integers(min_value=1, max_value=4),
    rounds=st.integers(min_value=1, max_value=6),
    infer=st.booleans(),
    data=st.data(),
)
def test_rounds_are_disjoint_padded_and_the_answer_is_right(
    n: int, min_hosts: int, rounds: int, infer: bool, data: st.DataObject
) -> None:
    hosts = _hosts(n)
    d = data.draw(st.integers(min_value=1, max_value=3))
    bad = set(data.draw(st.lists(st.sampled_from(hosts), min_size=d, max_size=d, unique=True)))
    planner = AdaptivePlanner(hosts, min_hosts=min_hosts, target_rounds=rounds, infer_last=infer)
    _drive(planner, bad, min_hosts)
    finding = planner.finding()
    assert set(finding.culprits) <= bad, "never blames a good host"
    assert set(finding.culprits) | set(finding.undecided) >= bad, "every bad host is found or left undecided"
    assert not finding.unexplained


def test_test_hosts_are_suspects_then_padding() -> None:
    assert PlannedTest(1, ("a",), ("b",)).hosts == ("a", "b")
