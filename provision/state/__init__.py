"""The lifecycle state store: one row per host, an append-only event history, validated moves, host facts."""

from provision.state.facts import HostFacts, facts_from_inventory
from provision.state.lifecycle import State, check_transition, parse_state, reached
from provision.state.records import Change, Event, HostRecord, Move
from provision.state.store import StateStore, counts

__all__ = [
    "Change",
    "Event",
    "HostFacts",
    "HostRecord",
    "Move",
    "State",
    "StateStore",
    "check_transition",
    "counts",
    "facts_from_inventory",
    "parse_state",
    "reached",
]
