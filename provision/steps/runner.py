"""The one runner every lifecycle step goes through: which hosts it acts on, bounded concurrency, a
deadline per host, cancellation, triage of every failure into a reason, recording, progress, results.

One bad host never stops or slows the others: each host runs in its own task under a semaphore and
its deadline, and every failure becomes a `failed` record with its reason, evidence and remediation.
Moves are written by one writer thread (group commit, `Recorder`) as soon as each host finishes a
stage, so a `kill -9` mid-run loses nothing already recorded, and a re-run only touches hosts that
still need the step.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from provision.errors import BringupError, IllegalTransition, StateError
from provision.metrics.stages import write_stage
from provision.site.model import Host
from provision.state import Change, HostRecord, Move, State, StateStore
from provision.state.intents import Ask, Outcome
from provision.steps.recorder import Recorder, Settle
from provision.steps.spec import StepSpec


class HostFailure(BringupError):
    """What stops one host in a step: a machine-readable reason, what happened, and the evidence."""

    def __init__(self, reason: str, detail: str, evidence: Mapping[str, Any] | None = None,
                 remediation: str | None = None) -> None:
        self.reason = reason
        self.detail = detail
        self.evidence = dict(evidence or {})
        self.remediation = remediation
        super().__init__(detail)


@dataclass(frozen=True)
class HostResult:
    """One host's outcome in one run of a step; every command renders these the same way."""

    host: str
    ok: bool
    skipped: bool = False
    reason: str | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    remediation: str = ""
    state: State | None = None  # where the host is after this run, as far as the run knows
    # What this run found on its start of a dead run's changes to the host that were never recorded, and recorded
    reconciled: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Failed in this run (a host skipped because it failed earlier did not)."""
        return not self.ok and not self.skipped


Progress = Callable[[HostResult], None]


class Recording:
    """What a step's per-host work uses to record moves (and the facts learnt with them), and the intents
    before each change it asks of a peer (`provision.state.intents`): a host's next move closes the intents
    the run holds for it, in the move's transaction; `settle` closes them without a move."""

    def __init__(self, recorder: Recorder | None, command: str) -> None:
        self._recorder = recorder
        self.command = command
        self.reached: dict[str, State] = {}
        self._open: dict[str, list[int]] = {}

    def _writer(self) -> Recorder:
        if self._recorder is None:
            raise StateError(f"{self.command}: this run records nothing (no state store)")
        return self._recorder

    async def move(self, host: str, to: State, evidence: Any = None, *, facts: Mapping[str, Any] | None = None,
                   may_skip: frozenset[State] = frozenset(), reason: str | None = None) -> Move:
        held = tuple(self._open.get(host, ()))
        change = Change(host, to, self.command, reason=reason, evidence=evidence, may_skip=may_skip, facts=facts,
                        settles=held)
        outcome = await self._writer().write(change)
        self._forget(host, held)
        self.reached[host] = outcome.after
        return outcome

    async def intend(self, host: str, system: str, subject: str, action: str, target: str) -> int:
        """Before asking `system` (its `subject`) to make a change on the host's behalf: the intent, on disk
        when this returns."""
        found = await self._writer().intend(Ask(host, system, subject, action, target, self.command))
        self._open.setdefault(host, []).append(found)
        return found

    async def settle(self, host: str, outcome: Outcome, observed: Mapping[str, Any] | None) -> None:
        """Close the intents this run holds for the host, with what it read back (or why it did not happen)."""
        held = tuple(self._open.get(host, ()))
        if held:
            await self._writer().settle(Settle(held, outcome, observed))
            self._forget(host, held)

    def _forget(self, host: str, ids: tuple[int, ...]) -> None:
        left = [i for i in self._open.get(host, ()) if i not in ids]
        if left:
            self._open[host] = left
        else:
            self._open.pop(host, None)


class Step(ABC):
    """A lifecycle step: its spec (from provision/steps/pipeline.py) and its per-host work."""

    spec: ClassVar[StepSpec]
    store: StateStore | None

    def limits(self) -> RunLimits:
        """This run's bounds (the step's options, else its spec's defaults)."""
        return RunLimits.of(self.spec)

    async def run(self, hosts: Sequence[Host], progress: Progress | None = None) -> list[HostResult]:
        """Run this step on `hosts` through the runner, recording as it goes."""
        return await run_step(self, self.store, hosts, self.limits(), progress=progress)

    @property
    def command(self) -> str:
        """The command recorded in history (health records its level: `health fast`)."""
        return self.spec.name

    def skip_reason(self, record: HostRecord) -> str | None:
        """None when the step should act on a host in this record's state, else why it does not."""
        takes = self.spec.takes
        state = record.resume_from if record.state is State.failed else record.state
        if record.state is State.failed and record.resume_from is None:
            state = State.declared
        if state in takes:
            return None
        why = record.state.value + (f" ({record.reason})" if record.reason else "")
        return f"nothing to do: {why}"

    def skipped_data(self, host: Host, record: HostRecord) -> dict[str, Any]:
        """What a skipped host's result shows (e.g. what an earlier run learnt)."""
        return {}

    async def reconcile(self, hosts: Sequence[Host]) -> None:  # noqa: B027 (steps that ask peers nothing: none)
        """Once, before hosts are selected, for every given host: the changes a dead run asked of this step's
        peer and never recorded, read back from the peer and recorded (`provision.state.intents`)."""

    def reconciled(self, host: str) -> tuple[str, ...]:
        """What `reconcile` found of a dead run's unrecorded changes to the host and recorded; a line each."""
        return ()

    async def prepare(self, hosts: Sequence[Host]) -> None:  # noqa: B027 (most steps need nothing first)
        """Once, before any host is touched (resolve credentials, read facts)."""

    @abstractmethod
    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        """One host's work; raise HostFailure (or any exception: it is triaged) to fail the host."""

    def deadline_s(self, host_timeout_s: float) -> float:
        return host_timeout_s

    def triage(self, exc: BaseException, host_timeout_s: float) -> HostFailure:
        if isinstance(exc, HostFailure):
            return exc
        if isinstance(exc, TimeoutError):
            return HostFailure("step_timeout", f"{self.spec.name} did not finish within {host_timeout_s:g} s",
                               {"error": "host deadline"})
        return HostFailure("step_error", f"{type(exc).__name__}: {exc}", {"error": type(exc).__name__})

    def failure_evidence(self, host: Host, failure: HostFailure) -> dict[str, Any]:
        return {**failure.evidence, "detail": failure.detail}


@dataclass(frozen=True)
class RunLimits:
    concurrency: int
    host_timeout_s: float

    @classmethod
    def of(cls, spec: StepSpec, concurrency: int | None = None, host_timeout_s: float | None = None) -> RunLimits:
        return cls(concurrency or spec.concurrency, host_timeout_s or spec.host_timeout_s)


def split_hosts(step: Step, store: StateStore, hosts: Iterable[Host]) -> tuple[list[Host], list[HostResult]]:
    """(hosts the step acts on, results for the others: skipped, with why)."""
    todo: list[Host] = []
    skipped: list[HostResult] = []
    for host in hosts:
        record = store.get(host.hostname)
        why = step.skip_reason(record)
        if why is None:
            todo.append(host)
        else:
            skipped.append(HostResult(host.hostname, record.state is not State.failed, skipped=True,
                                      reason=record.reason, detail=why, data=step.skipped_data(host, record),
                                      state=record.state))
    return todo, skipped


async def run_step(step: Step, store: StateStore | None, hosts: Sequence[Host], limits: RunLimits, *,
                   record_failures: bool = True, progress: Progress | None = None,
                   select: bool = True) -> list[HostResult]:
    """Run `step` on `hosts` (those it acts on, unless `select` is false), in their order, skipped last."""
    if store is None and (select or record_failures):
        raise StateError(f"{step.command}: a run without a state store can neither select nor record")
    started = time.time()
    if store is not None:
        await step.reconcile(hosts)
    todo, skipped = split_hosts(step, store, hosts) if select and store is not None else (list(hosts), [])
    skipped = _with_reconciled(step, skipped)
    for result in skipped:
        _report(progress, result)
    if not todo:
        if store is not None:
            write_stage(store, step.spec.name, skipped, started, time.time())
        return skipped
    if limits.concurrency < 1:
        raise BringupError("concurrency must be at least 1")
    await step.prepare(todo)
    recorder = Recorder(store) if store is not None else None
    rec = Recording(recorder, step.command)
    gate = asyncio.Semaphore(limits.concurrency)

    async def one(host: Host) -> HostResult:
        async with gate:
            result = await _one(step, host, rec, limits, record_failures)
        _report(progress, result)
        return result

    try:
        done = list(await asyncio.gather(*(one(h) for h in todo)))
    finally:
        if recorder is not None:
            await recorder.close()
    done = _with_reconciled(step, done)
    if store is not None:  # every stage leaves its Prometheus textfile metrics (provision/metrics/stages.py)
        write_stage(store, step.spec.name, done + skipped, started, time.time())
    return done + skipped


async def _one(step: Step, host: Host, rec: Recording, limits: RunLimits, record_failures: bool) -> HostResult:
    try:
        async with asyncio.timeout(step.deadline_s(limits.host_timeout_s)):
            data = await step.work(host, rec)
        return HostResult(host.hostname, True, data=data, state=rec.reached.get(host.hostname))
    except IllegalTransition as exc:  # the store refused a move: someone moved the host meanwhile
        return HostResult(host.hostname, False, reason="not_recorded", detail=str(exc),
                          remediation="look at the host's history: it was moved while this step ran",
                          state=rec.reached.get(host.hostname))
    except Exception as exc:  # every failure of one host is triaged, none escapes
        failure = step.triage(exc, limits.host_timeout_s)
    detail = failure.detail
    if record_failures:
        try:
            await rec.move(host.hostname, State.failed, step.failure_evidence(host, failure), reason=failure.reason)
        except Exception as store_exc:  # the state store itself failed: say so, go on with the others
            detail += f" (NOT recorded in the state store: {type(store_exc).__name__}: {store_exc})"
    remediation = failure.remediation if failure.remediation is not None else step.spec.remediation(failure.reason)
    return HostResult(host.hostname, False, reason=failure.reason, detail=detail, data=failure.evidence,
                      remediation=remediation, state=State.failed if record_failures else None)


def _with_reconciled(step: Step, results: list[HostResult]) -> list[HostResult]:
    return [replace(r, reconciled=lines) if (lines := step.reconciled(r.host)) else r for r in results]


def _report(progress: Progress | None, result: HostResult) -> None:
    if progress is not None:
        progress(result)
