"""Which hosts a health run may act on, and writing verdicts into the lifecycle (through the health step,
so verdicts reached elsewhere are recorded exactly as a run records its own), then golden promotion."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provision.golden.step import GoldenStep
from provision.health.step import HealthStep, KnownVerdicts, skip_reason
from provision.health.verdict import HostHealth, Verdict
from provision.site.model import Site
from provision.state import Move, StateStore
from provision.steps.runner import HostResult, Progress, run_step


@dataclass(frozen=True)
class Recorded:
    moves: tuple[Move, ...]
    promoted: tuple[str, ...]
    refused: dict[str, str]  # host → why the store refused its move


def eligibility(store: StateStore, hosts: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """(hosts to check, {host: why it is skipped})."""
    eligible: list[str] = []
    skipped: dict[str, str] = {}
    for name in hosts:
        why = skip_reason(store, store.get(name))
        if why is None:
            eligible.append(name)
        else:
            skipped[name] = why
    return eligible, skipped


async def check_and_record(step: HealthStep, hosts: Sequence[str], *, record: bool,
                           progress: Progress | None = None) -> tuple[list[HostResult], Recorded | None]:
    """Run the health step on `hosts` (recording unless `record` is false), then promote the healthy."""
    wanted = set(hosts)
    chosen = [h for h in step.site.hosts() if h.hostname in wanted]
    results = await run_step(step, step.store if record else None, chosen, step.limits(), record_failures=record,
                             progress=progress, select=False)
    if not record:
        return results, None
    refused = {r.host: r.detail for r in results if r.reason == "not_recorded"}
    healthy = [h for h in chosen if h.hostname not in refused
               and (v := step.verdicts.get(h.hostname)) is not None and v.verdict is Verdict.healthy]
    assert step.store is not None
    promoted = await GoldenStep(step.site, step.store).promote(healthy) if healthy else []
    return results, Recorded(tuple(step.moves), tuple(o.host for o in promoted), refused)


def record_results(site: Site, store: StateStore, results: Sequence[HostHealth], level: str) -> Recorded:
    step = KnownVerdicts(site, store, level, results)
    _, recorded = asyncio.run(check_and_record(step, [r.host for r in results], record=True))
    assert recorded is not None
    return recorded
