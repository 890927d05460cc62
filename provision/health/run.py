"""`provision health`: select the hosts, run the health step on them, record, promote, report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from provision.health.errors import HealthError
from provision.health.record import Recorded, check_and_record, eligibility
from provision.health.step import HealthRun, HealthStep
from provision.health.verdict import HostHealth, Problem, Verdict
from provision.site.model import Host, Site
from provision.site.select import select_hosts
from provision.ssh import SshSettings
from provision.state import StateStore
from provision.steps.runner import HostResult, Progress


@dataclass(frozen=True)
class HealthReport:
    site: str
    level: str
    results: tuple[HostHealth, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0
    recorded: Recorded | None = None


def _verdicts(step: HealthStep, results: Sequence[HostResult]) -> list[HostHealth]:
    """Each host's verdict, in the run's order; a host the runner stopped before the agent answered
    (its deadline) is unknown with the runner's reason."""
    out = []
    for r in results:
        verdict = step.verdicts.get(r.host)
        if verdict is None:
            problem = Problem("controller", "unknown", r.reason or "health_timeout", r.detail)
            verdict = HostHealth(r.host, Verdict.unknown, r.reason, r.detail, (problem,), 0.0,
                                 {"verdict": "unknown", "error": r.reason, "message": r.detail})
        out.append(verdict)
    return out


async def check_hosts(site: Site, hosts: Sequence[Host], level: str, settings: SshSettings, *, concurrency: int,
                      timeout_s: float, agent: str | None = None, progress: Progress | None = None) -> list[HostHealth]:
    """Run the agent on `hosts`, at most `concurrency` at a time, each within `timeout_s`; record nothing."""
    if concurrency < 1:
        raise HealthError("concurrency must be at least 1")
    step = HealthStep(site, None, HealthRun(level, settings, concurrency, timeout_s, agent=agent, record=False))
    results, _ = await check_and_record(step, [h.hostname for h in hosts], record=False, progress=progress)
    return _verdicts(step, results)


def run_health(
    site: Site,
    store: StateStore,
    *,
    pattern: str | None = None,
    level: str = "fast",
    concurrency: int | None = None,
    timeout_s: float | None = None,
    record: bool = True,
    settings: SshSettings | None = None,
    progress: Progress | None = None,
) -> HealthReport:
    """Select, check and (unless `record` is false) record. Hosts not yet configured are skipped."""
    started = time.monotonic()
    selected = select_hosts(site, pattern)
    if record:
        names, skipped = eligibility(store, [h.hostname for h in selected])
    else:
        names, skipped = [h.hostname for h in selected], {}
    if not names:
        return HealthReport(site.name, level, (), skipped, time.monotonic() - started, None)
    run = HealthRun(level, settings or SshSettings.from_site(site),
                    concurrency or site.spec.policy.health_concurrency,
                    timeout_s or site.spec.policy.health_timeout_s, record=record)
    step = HealthStep(site, store, run)
    results, recorded = asyncio.run(check_and_record(step, names, record=record, progress=progress))
    return HealthReport(site.name, level, tuple(_verdicts(step, results)), skipped, time.monotonic() - started,
                        recorded)
