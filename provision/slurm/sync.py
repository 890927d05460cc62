"""`provision slurm sync`: Slurm's node states in step with the lifecycle, and Slurm's findings back into it.

One read of every node (`sinfo --json`), a pure plan (`plan.py`), the changes grouped into as few `scontrol
update` calls as reasons allow (bounded concurrency), one more read, then the record: each host whose standing
in Slurm changed gets one history event (`slurm_<standing>`, with Slurm's state and reason as evidence) and its
row in the `slurm_nodes` table, in one transaction; a health-check drain of a golden host becomes
failed(<its reason>) first. The record is made from what Slurm says after the changes, not from what was sent,
so a sync killed between a change and its record, or one whose slurmctld went away half-way, is finished by
the next run: it reads the world again and records what it finds. Nothing is sent when the first read fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.site.model import Site
from provision.slurm.client import SlurmClient
from provision.slurm.errors import SlurmError, SlurmRefused
from provision.slurm.nodes import SlurmNode
from provision.slurm.plan import Action, Decision, HostView, Standing, SyncPlan, plan_sync, standing
from provision.slurm.reasons import parse_reason
from provision.state.intents import hosts_in_flight, in_flight_line
from provision.state.lifecycle import State
from provision.state.records import Change, dumps
from provision.state.store import StateStore

COMMAND = "slurm sync"
CONCURRENCY = 8
# slurmctld pings a resumed node within about SlurmdTimeout/3 and a live slurmd answers the first ping: a sync
# that follows the one that resumed it sooner than this does not record the node lost.
RESUME_GRACE_S = 60.0
# One row per host: its standing as last recorded, and the change a sync asked Slurm for and has not recorded yet
# (`intent`, written before the call, cleared with the record): a row that still has one was left by a sync that
# died between the two, and the next sync says it reconciled it from Slurm's state.
_TABLE = """CREATE TABLE IF NOT EXISTS slurm_nodes (
    host TEXT PRIMARY KEY, standing TEXT NOT NULL, node_state TEXT, reason TEXT, updated_at REAL NOT NULL,
    intent TEXT, intent_at REAL)"""


@dataclass(frozen=True)
class SyncResult:
    plan: SyncPlan
    dry_run: bool
    standings: Mapping[str, Standing]  # after the sync (before it, for a dry run)
    recorded: tuple[str, ...]  # hosts whose change was recorded in their history
    failed_recorded: tuple[str, ...]  # golden hosts recorded failed from a health-check drain
    error: str | None = None  # set when changes stopped half-way (a re-run finishes them)
    wall_s: float = 0.0
    calls: int = 0  # scontrol update calls made
    applied: tuple[str, ...] = field(default_factory=tuple)
    reconciled: tuple[str, ...] = field(default_factory=tuple)  # a sync died after asking Slurm; recorded now


def managed_hosts(site: Site) -> list[str]:
    """The site's hosts that Slurm schedules: those of a host class some partition lists, in site order."""
    slurm = site.spec.slurm
    if slurm is None:
        return []
    classes = {c for p in slurm.partitions for c in p.classes}
    return [h.hostname for h in site.hosts() if h.host_class in classes]


def host_views(store: StateStore, names: Sequence[str]) -> list[HostView]:
    records = {r.hostname: r for r in store.hosts()}
    in_flight = hosts_in_flight(store)
    return [HostView(n, records[n].state, records[n].reason, records[n].updated_at,
                     in_flight_line(in_flight[n]) if n in in_flight else "") for n in names if n in records]


def recorded_standings(store: StateStore) -> tuple[dict[str, tuple[str, float]], list[str]]:
    """Each host's standing as last recorded (and when), and the hosts a sync asked Slurm to change without
    recording it."""
    db = store.reader()
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'slurm_nodes'").fetchone() is None:
        return {}, []
    rows = db.execute("SELECT host, standing, updated_at, intent FROM slurm_nodes").fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}, sorted(row[0] for row in rows if row[3])


def _settled(node_standing: Standing, node: SlurmNode | None, before: tuple[str, float] | None,
             now: float) -> Standing:
    """A node resumed by an earlier sync stays `resuming` while its slurmd has had no time to register again: a
    sync right after the one that resumed it (the steps' syncs come back to back) records no not_responding."""
    # Not once Slurm has set it DOWN: it gave up on the node (a node lost right after its resume is lost).
    if before is not None and before[0] == Standing.resuming.value and node_standing is Standing.not_responding \
            and now - before[1] < RESUME_GRACE_S and node is not None and node.state != "down":
        return Standing.resuming
    return node_standing


def _intend(store: StateStore, sends: Sequence[Decision]) -> None:
    """Before any call: what this sync is about to ask Slurm for, per host."""
    now = time.time()
    with store.transaction() as db:
        db.execute(_TABLE)
        db.executemany(
            "INSERT INTO slurm_nodes (host, standing, updated_at, intent, intent_at) VALUES (?, 'unknown', ?, ?, ?) "
            "ON CONFLICT(host) DO UPDATE SET intent = excluded.intent, intent_at = excluded.intent_at",
            [(d.host, now, f"{d.action.value}: {d.reason or ''}".rstrip(": "), now) for d in sends])


def _evidence(node: SlurmNode | None, where: Standing | None = None) -> dict[str, Any]:
    if node is None:
        return {"slurm": {"standing": Standing.missing.value}}
    return {"slurm": {"standing": (where or standing(node)).value, "state": node.display(), "reason": node.reason,
                      "set_by": node.reason_user, "at": node.reason_at}}


async def _apply(client: SlurmClient, decisions: Sequence[Decision]) -> tuple[int, list[str], str | None]:
    """Send the plan's changes, one call per (state, reason): how many calls, which hosts, the first error."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for d in decisions:
        if d.action is Action.resume:
            # UNDRAIN clears the drain and keeps the base state (a node Slurm has down for not responding stays
            # down); a node bringup set DOWN (on_leave: down) needs RESUME, which Slurm refuses for a node in
            # UNKNOWN (never registered): "Invalid node state specified" (scontrol(1), seen on 22.05.8).
            state = "RESUME" if (d.node_state or "").startswith("DOWN") else "UNDRAIN"
            groups.setdefault((state, None), []).append(d.host)
        elif d.action in (Action.drain, Action.down):
            groups.setdefault((d.action.value.upper(), d.reason), []).append(d.host)
    gate = asyncio.Semaphore(CONCURRENCY)
    done: list[str] = []
    errors: list[str] = []

    async def one(state: str, reason: str | None, hosts: list[str]) -> None:
        async with gate:
            if errors:
                return  # slurmctld failed a call: stop sending, the next run finishes
            try:
                await client.update(hosts, state, reason)
            except SlurmRefused as exc:
                # 22.05.8 clears the drain of a node that never registered (state UNKNOWN) and still answers
                # this, going on with the other names: the read-back decides what happened.
                if state != "UNDRAIN" or "Invalid node state specified" not in str(exc):
                    errors.append(str(exc))
                    return
            except SlurmError as exc:
                errors.append(str(exc))
                return
            done.extend(hosts)

    await asyncio.gather(*(one(state, reason, hosts) for (state, reason), hosts in groups.items()))
    return len(groups), done, (errors[0] if errors else None)


def _record(store: StateStore, plan: SyncPlan, after: Mapping[str, SlurmNode | None],
            before: Mapping[str, tuple[str, float]], interrupted: Sequence[str]) -> tuple[list[str], list[str]]:
    now = time.time()
    failures = [Change(d.host, State.failed, COMMAND, reason=d.reason,
                       evidence={**_evidence(after.get(d.host)),
                                 "health_check": parse_reason(d.node_reason).detail})
                for d in plan.decisions if d.action is Action.record_failed]
    if failures:
        store.transition_many(failures)
    changed: list[tuple[str, Standing, SlurmNode | None]] = []
    for d in plan.decisions:
        node = after.get(d.host)
        now_standing = standing(node)
        if d.action is Action.resume and now_standing is Standing.not_responding and \
                "NOT_RESPONDING" not in (d.node_state or "") and not (d.node_state or "").startswith("UNKNOWN"):
            now_standing = Standing.resuming
        now_standing = _settled(now_standing, node, before.get(d.host), now)
        if (before.get(d.host) or ("", 0.0))[0] != now_standing.value:
            changed.append((d.host, now_standing, node))
    intended = [d.host for d in plan.decisions if d.action in (Action.drain, Action.down, Action.resume)] + \
        list(interrupted)
    if changed or intended:
        with store.transaction() as db:
            db.execute(_TABLE)
            db.executemany("UPDATE slurm_nodes SET intent = NULL, intent_at = NULL WHERE host = ?",
                           [(h,) for h in intended])
            for host, where, node in changed:
                blob = dumps(_evidence(node, where))
                db.execute(
                    "INSERT INTO events (ts, host, from_state, to_state, command, reason, evidence, actor, override) "
                    "SELECT ?, hostname, state, state, ?, ?, ?, ?, 0 FROM hosts WHERE hostname = ?",
                    (now, COMMAND, f"slurm_{where.value}", blob, store.actor, host))
                db.execute(
                    "INSERT INTO slurm_nodes (host, standing, node_state, reason, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(host) DO UPDATE SET standing = excluded.standing, node_state = excluded.node_state, "
                    "reason = excluded.reason, updated_at = excluded.updated_at",
                    (host, where.value, node.display() if node else None, node.reason if node else None, now))
    return [h for h, _, _ in changed], [c.host for c in failures]


def _unfinished(sends: Sequence[Decision], after: Mapping[str, SlurmNode | None]) -> list[str]:
    """Hosts whose change the read-back does not show."""
    out = []
    for d in sends:
        where = standing(after.get(d.host))
        resumed = d.action is Action.resume and where not in (Standing.drained, Standing.missing)
        drained = d.action in (Action.drain, Action.down) and where is Standing.drained
        if not (resumed or drained):
            out.append(d.host)
    return out


async def sync(site: Site, store: StateStore, client: SlurmClient, *, dry_run: bool = False) -> SyncResult:
    slurm = site.spec.slurm
    if slurm is None:
        raise SlurmError(f"site {site.name} has no slurm section: nothing to keep in step")
    start = time.monotonic()
    names = managed_hosts(site)
    nodes = await client.nodes()
    before, interrupted = recorded_standings(store)
    views = host_views(store, names)
    plan = plan_sync(views, nodes, on_leave=slurm.on_leave)
    by_name = {n.name: n for n in nodes}
    if dry_run:
        return SyncResult(plan, True, {d.host: standing(by_name.get(d.host)) for d in plan.decisions}, (), (),
                          wall_s=time.monotonic() - start, reconciled=tuple(interrupted))
    calls, error = 0, None
    applied: list[str] = []
    sends = [d for d in plan.acting() if d.action is not Action.record_failed]
    if sends:
        _intend(store, sends)
        calls, applied, error = await _apply(client, sends)
        try:
            by_name = {n.name: n for n in await client.nodes()}
        except SlurmError as exc:
            error = error or str(exc)
            by_name = {}
    if by_name:
        after: dict[str, SlurmNode | None] = {d.host: by_name.get(d.host) for d in plan.decisions}
        recorded, failed = _record(store, plan, after, before, interrupted)
        unfinished = _unfinished(sends, after)
        if unfinished and error is None:
            error = f"Slurm did not apply the change to {', '.join(unfinished[:10])}" + \
                    (f" and {len(unfinished) - 10} more" if len(unfinished) > 10 else "")
    else:
        recorded, failed = [], []
    return SyncResult(plan, False, {d.host: standing(by_name.get(d.host)) for d in plan.decisions} if by_name else {},
                      tuple(recorded), tuple(failed), error, time.monotonic() - start, calls, tuple(applied),
                      tuple(interrupted) if by_name else ())
