"""The lifecycle state store: one row per host, an append-only event history, validated moves."""

from provision.state.lifecycle import FLOW, State, check_transition, parse_state, reached
from provision.state.store import Change, Event, HostRecord, Outcome, StateStore, counts

__all__ = [
    "FLOW",
    "Change",
    "Event",
    "HostRecord",
    "Outcome",
    "State",
    "StateStore",
    "check_transition",
    "counts",
    "parse_state",
    "reached",
]
