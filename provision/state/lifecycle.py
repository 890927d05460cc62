"""The host lifecycle: its states and which moves between them are legal. Pure, no I/O."""

from __future__ import annotations

from enum import StrEnum

from provision.errors import IllegalTransition


class State(StrEnum):
    declared = "declared"
    bmc_reachable = "bmc_reachable"
    macs_harvested = "macs_harvested"
    pxe_armed = "pxe_armed"
    enlisted = "enlisted"
    commissioned = "commissioned"
    deployed = "deployed"
    configured = "configured"
    healthy = "healthy"
    burned_in = "burned_in"
    golden = "golden"
    failed = "failed"


FLOW: tuple[State, ...] = tuple(s for s in State if s is not State.failed)
RANK: dict[State, int] = {state: i for i, state in enumerate(FLOW)}


def parse_state(value: str) -> State:
    try:
        return State(value)
    except ValueError:
        names = ", ".join(s.value for s in State)
        raise IllegalTransition(f"unknown state {value!r} (states: {names})") from None


def check_transition(
    current: State,
    target: State,
    resume_from: State | None = None,
    may_skip: frozenset[State] = frozenset(),
) -> None:
    """Raise `IllegalTransition` unless the lifecycle allows `current → target`.

    Allowed: one step forward along the flow; any state to `failed`; and from `failed` back into the
    flow at any state up to one step past the state the host was in when it failed (`resume_from`),
    which is how a repaired host picks up where it stopped. A failed host never goes straight back
    to `golden`: it earns it again. `may_skip` names states a site policy lets the flow pass over
    (burn-in, on a site that does not require it). Everything else (skipping ahead, going backwards)
    needs an operator override.
    """
    if target is State.failed:
        return
    if current is State.failed:
        ceiling = RANK[resume_from] + 1 if resume_from is not None else 0
        if target is State.golden:
            raise IllegalTransition("a failed host earns golden again: health check and burn-in first")
        if RANK[target] <= ceiling:
            return
        allowed = FLOW[min(ceiling, len(FLOW) - 1)].value
        raise IllegalTransition(
            f"failed → {target.value} skips steps: the host failed while {resume_from or 'declared'}, "
            f"so it can re-enter the flow at {allowed} or earlier"
        )
    if RANK[target] > RANK[current] and all(s in may_skip for s in FLOW[RANK[current] + 1 : RANK[target]]):
        return
    if RANK[target] <= RANK[current]:
        raise IllegalTransition(f"{current.value} → {target.value} goes backwards (an operator can `mark` it)")
    missing = ", ".join(s.value for s in FLOW[RANK[current] + 1 : RANK[target]])
    raise IllegalTransition(f"{current.value} → {target.value} skips {missing}")


def reached(current: State, target: State) -> bool:
    """True when a host in `current` already is at or past `target` in the flow (a re-run is a no-op)."""
    if current is State.failed or target is State.failed:
        return current is target
    return RANK[current] >= RANK[target]
