"""`provision health`: the agent on every selected host over SSH, bounded and timed, then recorded.

Every host gets a verdict, whatever happens to it: an SSH failure, a hang past the per-host timeout,
garbled output or a bug here all end as "unknown" for that host alone, never as a crash of the run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provision.health.agent_command import agent_command, agent_program
from provision.health.errors import HealthError
from provision.health.expectations import load_overlay, render_expectations, validate_expectations
from provision.health.record import Recorded, eligibility, record_results
from provision.health.verdict import HostHealth, Problem, Verdict, judge, unreachable
from provision.site.model import Host, Site
from provision.site.select import select_hosts
from provision.ssh import SshSettings, run_command
from provision.ssh.errors import SshError
from provision.state import StateStore

Progress = Callable[[HostHealth], None]


@dataclass(frozen=True)
class HealthReport:
    site: str
    level: str
    results: tuple[HostHealth, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0
    recorded: Recorded | None = None


async def check_hosts(
    site: Site,
    hosts: Sequence[Host],
    level: str,
    settings: SshSettings,
    *,
    concurrency: int,
    timeout_s: float,
    agent: str | None = None,
    progress: Progress | None = None,
) -> list[HostHealth]:
    """Run the agent on `hosts`, at most `concurrency` at a time, each within `timeout_s`."""
    if concurrency < 1:
        raise HealthError("concurrency must be at least 1")
    # The long level re-runs the fast checks too: a host is never called healthy on its long checks alone.
    agent_level = "all" if level == "long" else level
    command = agent_command(agent_level, agent or agent_program())
    overlay = load_overlay(site)
    rendered = {h.hostname: render_expectations(site, h, level, overlay) for h in hosts}
    checked: set[str] = set()
    for host in hosts:
        if host.host_class not in checked:
            validate_expectations(rendered[host.hostname], f"host class {host.host_class!r} ({level} checks)")
            checked.add(host.host_class)
    configs = {name: json.dumps(config).encode() for name, config in rendered.items()}
    settings.prepare()
    gate = asyncio.Semaphore(concurrency)

    async def one(host: Host) -> HostHealth:
        async with gate:
            started = time.monotonic()
            try:
                endpoint = settings.endpoint(host.hostname)
                stdin = configs[host.hostname]
                run = await run_command(endpoint, settings, command, stdin=stdin, timeout_s=timeout_s)
                result = judge(run, expected_host=host.hostname, level=agent_level)
            except SshError as exc:
                result = unreachable(host.hostname, exc, time.monotonic() - started)
            except Exception as exc:  # one host's surprise must not stop the others
                message = f"controller error: {type(exc).__name__}: {exc}"
                result = HostHealth(
                    host.hostname,
                    Verdict.unknown,
                    "controller_error",
                    message,
                    (Problem("controller", "unknown", "controller_error", message),),
                    time.monotonic() - started,
                    {"verdict": "unknown", "error": "controller_error", "message": message},
                )
        if progress is not None:
            progress(result)
        return result

    return list(await asyncio.gather(*(one(h) for h in hosts)))


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
        chosen = [h for h in selected if h.hostname in set(names)]
    else:
        chosen, skipped = selected, {}
    results: list[HostHealth] = []
    if chosen:
        results = asyncio.run(
            check_hosts(
                site,
                chosen,
                level,
                settings or SshSettings.from_site(site),
                concurrency=concurrency or site.spec.policy.health_concurrency,
                timeout_s=timeout_s or site.spec.policy.health_timeout_s,
                progress=progress,
            )
        )
    recorded = record_results(site, store, results, level) if record and results else None
    return HealthReport(site.name, level, tuple(results), skipped, time.monotonic() - started, recorded)
