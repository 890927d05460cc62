"""Earning the golden state: a host is golden once healthy and burned in, or healthy alone on a site
whose policy does not require burn-in (`policy.golden_requires_burn_in: false`). Losing it needs nothing
here: any later failure moves the host to `failed`, and it earns golden again from there. A host with a change
in flight (an open intent, `provision.state.intents`) is not promoted until that change is recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from provision.firmware.gate import off_baseline
from provision.site.model import Host, Site
from provision.state import HostRecord, Move, State, StateStore
from provision.state.intents import hosts_in_flight, in_flight_line
from provision.steps.pipeline import GOLDEN
from provision.steps.runner import HostResult, Progress, Recording, RunLimits, Step, run_step


def promotion_sources(site: Site) -> tuple[State, ...]:
    """The states from which a host may become golden on this site."""
    if site.spec.policy.golden_requires_burn_in:
        return (State.burned_in,)
    return (State.healthy, State.burned_in)


class GoldenStep(Step):
    spec = GOLDEN

    def __init__(self, site: Site, store: StateStore) -> None:
        self.site = site
        self.store = store
        self.sources = promotion_sources(site)
        # Burn-in is passed over only where the site does not require it.
        self._skip = frozenset({State.burned_in}) if State.healthy in self.sources else frozenset()
        self._in_flight = hosts_in_flight(store)
        self._off_baseline = off_baseline(site, store)  # policy.golden_requires_baseline

    def limits(self) -> RunLimits:
        return RunLimits(concurrency=1024, host_timeout_s=60.0)

    def skip_reason(self, record: HostRecord) -> str | None:
        if record.state in self.sources and record.hostname in self._in_flight:
            return f"not promoted: {in_flight_line(self._in_flight[record.hostname])}"
        if record.state in self.sources and record.hostname in self._off_baseline:
            return f"not promoted: off its firmware baseline ({self._off_baseline[record.hostname]})"
        if record.state in self.sources:
            return None
        return f"{record.state.value}: not eligible for golden (needs {' or '.join(s.value for s in self.sources)})"

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        outcome = await rec.move(host.hostname, State.golden, may_skip=self._skip)
        return {"before": outcome.before.value, "changed": outcome.changed}

    async def promote(self, hosts: Sequence[Host], progress: Progress | None = None) -> list[Move]:
        """Every eligible host of `hosts` to golden; the moves made."""
        results = await run_step(self, self.store, hosts, self.limits(), progress=progress)
        return [_outcome(r) for r in results if r.ok and not r.skipped and r.data.get("changed")]


def _outcome(result: HostResult) -> Move:
    return Move(result.host, State(result.data["before"]), State.golden, changed=True)


def promote_golden(site: Site, store: StateStore, hosts: Iterable[str] | None = None) -> list[Move]:
    """Move every eligible host (of `hosts`, default all) to golden; returns the moves."""
    wanted = None if hosts is None else set(hosts)
    chosen = sorted((h for h in site.hosts() if wanted is None or h.hostname in wanted), key=lambda h: h.hostname)
    return asyncio.run(GoldenStep(site, store).promote(chosen))
