"""The fan-out plan: the controller seeds a few hosts, then every host that has the archive sends it to
one more each round (the holders double), so 512 hosts take 1 + log2(512 / seeds) rounds and the
controller's uplink carries `seeds` copies instead of 512. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CONTROLLER = ""  # the source of the seed copies


@dataclass(frozen=True)
class Copy:
    source: str  # CONTROLLER or a host that already has the archive
    target: str


def plan_tree(hosts: Sequence[str], seeds: int = 2) -> list[list[Copy]]:
    """Rounds of copies: round 0 from the controller to `seeds` hosts, then holders to new hosts."""
    if seeds < 1:
        raise ValueError("seeds: at least 1")
    todo = list(hosts)
    rounds = [[Copy(CONTROLLER, h) for h in todo[:seeds]]]
    holders = [c.target for c in rounds[0]]
    todo = todo[seeds:]
    while todo:
        step = [Copy(src, dst) for src, dst in zip(holders, todo, strict=False)]
        todo = todo[len(step):]
        holders += [c.target for c in step]
        rounds.append(step)
    return [r for r in rounds if r]


def plan_direct(hosts: Sequence[str]) -> list[list[Copy]]:
    """The baseline: the controller sends to every host itself (one round)."""
    return [[Copy(CONTROLLER, h) for h in hosts]]


def replan(rounds: list[list[Copy]], failed: set[str]) -> list[list[Copy]]:
    """A host that failed to receive serves nobody: its planned copies come from the controller instead."""
    return [[Copy(CONTROLLER if c.source in failed else c.source, c.target) for c in r] for r in rounds]
