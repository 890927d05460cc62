"""What a lifecycle step declares: the states it takes hosts from and moves them to, the host facts it
reads and writes, its failure reasons with their remediation, and its default bounds. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from provision.state.lifecycle import State


@dataclass(frozen=True)
class StepSpec:
    name: str  # the command recorded in each host's history
    run_by: str  # how a person runs it
    summary: str
    takes: tuple[State, ...]  # states a host must be in (or have failed in) for the step to act on it
    moves_to: tuple[State, ...]  # states the step moves a host to, in order (empty: no lifecycle change)
    reads: tuple[str, ...] = ()  # host facts it needs (provision.state.facts.HostFacts fields)
    writes: tuple[str, ...] = ()  # host facts it learns
    # failure reason -> what to do about it; a key ending in `*` covers every reason starting with what precedes it
    reasons: Mapping[str, str] = field(default_factory=dict)
    concurrency: int = 128
    host_timeout_s: float = 120.0

    def remediation(self, reason: str | None) -> str:
        if not reason:
            return ""
        if reason in self.reasons:
            return self.reasons[reason]
        return next((text for key, text in self.reasons.items()
                     if key.endswith("*") and reason.startswith(key[:-1])), "")
