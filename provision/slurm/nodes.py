"""What Slurm says about its nodes: `sinfo --json` (Slurm 22.05, openapi v0.0.38 node objects) to frozen data.

A node's `state` is its base state in lower case (`idle`, `allocated`, `mixed`, `down`, `unknown`, `future`,
`error`) and `state_flags` the flags (`DRAIN`, `NOT_RESPONDING`, `FAIL`, ...): DRAIN is a flag, not a state
(REFERENCE-wave3 A1, slurm@22.05.8 `src/common/slurm_protocol_defs.c`). The reason, who set it and when
are Slurm's `reason`, `reason_set_by_user` and `reason_changed_at` (epoch; 0 when unset). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.slurm.errors import SlurmAnswerInvalid
from provision.state.peer_json import loads
from provision.state.peer_text import shown

REASON_LIMIT = 512  # a reason a peer set is shown and stored at most this long


def clean(text: str, limit: int = REASON_LIMIT) -> str:
    """Text from Slurm (a reason anybody with scontrol set) safe to store and show: control characters
    escaped (`\\n`, `\\x1b`), never interpreted, and at most `limit` characters (`provision.state.peer_text`)."""
    return shown(text, limit)


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str
    flags: frozenset[str]
    reason: str
    reason_user: str | None
    reason_at: float | None
    partitions: tuple[str, ...]

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.flags

    @property
    def out_of_service(self) -> bool:
        """Takes no new jobs: drained (or draining), down, failing, or in a state jobs never get."""
        return self.drained or "FAIL" in self.flags or self.state in ("down", "error", "future")

    def display(self) -> str:
        """`idle+DRAIN`, `down+NOT_RESPONDING`: as `scontrol show node` prints State=."""
        return "+".join([self.state.upper(), *sorted(self.flags)])


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SlurmAnswerInvalid(f"sinfo --json: {what} is {type(value).__name__}, not text")
    return value


def _node(raw: Mapping[str, Any]) -> SlurmNode:
    name = _text(raw.get("name"), "a node's name")
    if not name:
        raise SlurmAnswerInvalid("sinfo --json: a node without a name")
    flags = raw.get("state_flags") or []
    partitions = raw.get("partitions") or []
    if not isinstance(flags, list) or not isinstance(partitions, list):
        raise SlurmAnswerInvalid(f"sinfo --json: node {clean(name, 80)!r}: state_flags/partitions are not lists")
    changed = raw.get("reason_changed_at")
    user = raw.get("reason_set_by_user")
    return SlurmNode(
        name=clean(name, 128),
        state=clean(_text(raw.get("state"), "a node's state"), 32).lower(),
        flags=frozenset(clean(_text(f, "a state flag"), 32).upper() for f in flags),
        reason=clean(_text(raw.get("reason"), "a node's reason")),
        reason_user=clean(user, 64) if isinstance(user, str) and user else None,
        reason_at=float(changed) if isinstance(changed, int | float) and changed > 0 else None,
        partitions=tuple(clean(_text(p, "a partition"), 64) for p in partitions),
    )


def parse_sinfo_json(text: str) -> tuple[SlurmNode, ...]:
    """Every node of `sinfo --json`'s answer; SlurmAnswerInvalid for anything else (its `errors` included:
    sinfo 22.05 exits 0 with an empty node list and an error entry when slurmctld cannot be reached)."""
    try:
        data = loads(text, what="sinfo --json")
    except (ValueError, RecursionError) as exc:
        raise SlurmAnswerInvalid(f"sinfo --json did not answer JSON: {clean(str(exc), 120)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise SlurmAnswerInvalid("sinfo --json: no 'nodes' list in the answer")
    errors = data.get("errors") or []
    if errors:
        first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
        what = clean(str(first.get("error") or first.get("description") or errors), 200)
        raise SlurmAnswerInvalid(f"sinfo --json reported an error: {what}")
    nodes: list[SlurmNode] = []
    for raw in data["nodes"]:
        if not isinstance(raw, dict):
            raise SlurmAnswerInvalid("sinfo --json: a node that is not an object")
        nodes.append(_node(raw))
    return tuple(nodes)
