"""What `provision slurm sync` does to each node, decided from the lifecycle and Slurm's answer. Pure.

| host in bringup | node in Slurm | action | standing after |
|---|---|---|---|
| golden | in service | - | available |
| golden | drained by the sync (`bringup: ...`) | resume | available |
| golden | drained by the health check (`bringup-check: ...`) | recorded failed(<its reason>) | health_check_drained |
| golden | drained or down for another reason (an admin, Slurm) | - (said) | admin_drained |
| golden | not responding (down or not, undrained) | - (said: unknown, not available to jobs) | not_responding |
| golden, a change in flight (provision.state.intents) | in service | drain (`bringup: change_in_flight`) | drained |
| not golden | in service, or down without a drain | drain (or down: `slurm.on_leave`) | drained |
| not golden | drained by the sync, other reason text | drain again with the new reason | drained |
| not golden | drained by the check, an admin, or the sync | - | as it is |
| any | unknown to Slurm | - (said; golden: the command fails) | missing |
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from provision.slurm.nodes import SlurmNode
from provision.slurm.reasons import Owner, parse_reason, sync_reason
from provision.state.lifecycle import State

# The drain reason of a golden host with a change in flight (a power cycle asked, not recorded): no job starts on
# it until the change is recorded, and the next sync resumes it.
IN_FLIGHT = "change_in_flight"


class Standing(StrEnum):
    available = "available"
    drained = "drained"  # by bringup's sync
    health_check_drained = "health_check_drained"
    admin_drained = "admin_drained"
    not_responding = "not_responding"
    missing = "missing"
    # Resumed by this sync, its slurmd not heard from since: Slurm shows a resumed node NOT_RESPONDING until the
    # daemon registers again (scontrol(1) "RESUME"); the next sync records it available, or not responding.
    resuming = "resuming"


class Action(StrEnum):
    none = "none"
    drain = "drain"
    down = "down"
    resume = "resume"
    record_failed = "record_failed"


@dataclass(frozen=True)
class HostView:
    """A host as the state store has it."""

    name: str
    state: State
    reason: str | None
    since: float  # when it entered its current state
    in_flight: str = ""  # a change bringup asked of a peer and has not recorded yet (provision.state.intents)


@dataclass(frozen=True)
class Decision:
    host: str
    lifecycle: str
    node_state: str | None  # Slurm's State= before, None when Slurm does not know the node
    node_reason: str
    action: Action
    reason: str | None = None  # the reason the action sets (drain/down), or the failure recorded
    note: str = ""


@dataclass(frozen=True)
class SyncPlan:
    decisions: tuple[Decision, ...]
    unmanaged: tuple[str, ...] = field(default_factory=tuple)  # Slurm nodes that are no host of the site

    def acting(self) -> list[Decision]:
        return [d for d in self.decisions if d.action is not Action.none]

    def missing_golden(self) -> list[str]:
        return [d.host for d in self.decisions if d.node_state is None and d.lifecycle == State.golden.value]


def standing(node: SlurmNode | None) -> Standing:
    """Where a node stands in Slurm, in bringup's words."""
    if node is None:
        return Standing.missing
    owner = parse_reason(node.reason).owner
    if node.out_of_service and owner is Owner.sync:
        return Standing.drained
    if node.out_of_service and owner is Owner.check:
        return Standing.health_check_drained
    # Slurm lost its slurmd (DOWN with Slurm's own "Not responding", or UNKNOWN: never registered): nobody took
    # it out of service, Slurm cannot tell what it is. Unknown, not an admin's drain.
    if (node.not_responding or node.state == "unknown") and not node.drained and "FAIL" not in node.flags:
        return Standing.not_responding
    if node.out_of_service:
        return Standing.admin_drained
    return Standing.available


def _golden(host: HostView, node: SlurmNode) -> Decision:
    reason = parse_reason(node.reason)
    base = dict(host=host.name, lifecycle=host.state.value, node_state=node.display(), node_reason=node.reason)
    where = standing(node)
    if where is Standing.drained:
        return Decision(**base, action=Action.resume, note="golden again: resumed (bringup had drained it)")
    if where is Standing.health_check_drained:
        code = reason.code or "slurm_health_check"
        return Decision(**base, action=Action.record_failed, reason=code,
                        note=f"Slurm's health check drained it: recorded failed({code})")
    if where is Standing.admin_drained:
        who = node.reason_user or "someone else"
        return Decision(**base, action=Action.none,
                        note=f"golden in bringup, but out of service in Slurm by {who}: left as it is")
    if where is Standing.not_responding:
        return Decision(**base, action=Action.none,
                        note="golden in bringup, but Slurm cannot reach its slurmd: unknown, not available to jobs")
    return Decision(**base, action=Action.none)


def _not_golden(host: HostView, node: SlurmNode, on_leave: str) -> Decision:
    code = IN_FLIGHT if host.in_flight else host.reason if host.state is State.failed else None
    wanted = sync_reason(code, host.state.value, host.since)
    base = dict(host=host.name, lifecycle=host.state.value, node_state=node.display(), node_reason=node.reason)
    where = standing(node)
    act = Action.down if on_leave == "down" else Action.drain
    if where in (Standing.available, Standing.not_responding):
        why = f"golden, but {host.in_flight}" if host.in_flight else f"not golden ({host.state.value})"
        return Decision(**base, action=act, reason=wanted, note=f"{why}: {act.value}")
    if where is Standing.drained and node.reason != wanted:
        return Decision(**base, action=act, reason=wanted, note="reason updated")
    if where is Standing.admin_drained:
        who = node.reason_user or "someone else"
        return Decision(**base, action=Action.none, note=f"already out of service by {who}: left as it is")
    return Decision(**base, action=Action.none)


def plan_sync(hosts: Sequence[HostView], nodes: Iterable[SlurmNode], *, on_leave: str) -> SyncPlan:
    by_name: Mapping[str, SlurmNode] = {n.name: n for n in nodes}
    decisions: list[Decision] = []
    for host in hosts:
        node = by_name.get(host.name)
        if node is None:
            decisions.append(Decision(host.name, host.state.value, None, "", Action.none,
                                      note="Slurm does not know this node (not in slurm.conf: run the slurm roles)"))
        elif host.state is State.golden and not host.in_flight:
            decisions.append(_golden(host, node))
        else:
            decisions.append(_not_golden(host, node, on_leave))
    names = {h.name for h in hosts}
    return SyncPlan(tuple(decisions), tuple(sorted(n for n in by_name if n not in names)))
