"""Which lifecycle moves are legal, as a pure function."""

from __future__ import annotations

import itertools

import pytest

from provision.errors import IllegalTransition
from provision.state.lifecycle import FLOW, State, check_transition, reached


@pytest.mark.parametrize(("a", "b"), list(itertools.pairwise(FLOW)))
def test_each_step_forward_is_legal(a: State, b: State) -> None:
    check_transition(a, b)


@pytest.mark.parametrize("state", FLOW)
def test_any_state_can_fail(state: State) -> None:
    check_transition(state, State.failed)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (State.declared, State.pxe_armed, "skips bmc_reachable, macs_harvested"),
        (State.configured, State.golden, "skips healthy, burned_in"),
        (State.deployed, State.enlisted, "goes backwards"),
        (State.golden, State.healthy, "goes backwards"),
        (State.declared, State.declared, "goes backwards"),
    ],
)
def test_skips_and_backward_moves_are_illegal(a: State, b: State, message: str) -> None:
    with pytest.raises(IllegalTransition, match=message):
        check_transition(a, b)


def test_a_failed_host_resumes_up_to_one_step_past_where_it_failed() -> None:
    check_transition(State.failed, State.pxe_armed, resume_from=State.macs_harvested)
    check_transition(State.failed, State.bmc_reachable, resume_from=State.macs_harvested)
    with pytest.raises(IllegalTransition, match="re-enter the flow at pxe_armed or earlier"):
        check_transition(State.failed, State.enlisted, resume_from=State.macs_harvested)


def test_a_failed_golden_host_must_earn_golden_again() -> None:
    check_transition(State.failed, State.healthy, resume_from=State.golden)
    with pytest.raises(IllegalTransition, match="earns golden again"):
        check_transition(State.failed, State.golden, resume_from=State.golden)


def test_policy_may_skip_burn_in() -> None:
    with pytest.raises(IllegalTransition):
        check_transition(State.healthy, State.golden)
    check_transition(State.healthy, State.golden, may_skip=frozenset({State.burned_in}))


def test_reached_treats_later_states_as_done_but_not_failed() -> None:
    assert reached(State.golden, State.configured)
    assert not reached(State.configured, State.golden)
    assert not reached(State.failed, State.declared)
