"""`provision bisect`: run a failing multi-host job on sub-groups over SSH until the bad host(s) are known.

The job is a command template run on the first host of each sub-group (the launcher, as `mpirun` or a
torchrun rendezvous host would be) with the group filled in: `{hosts}` (comma-separated), `{hosts_space}`,
`{nnodes}`, `{first}`. A sub-group passes when the command exits 0 within the timeout; a hang, a
non-zero exit or an unreachable launcher is a failure. All jobs of a round run at the same time (their
host sets are disjoint). Culprits move to `failed` with reason `bisect_culprit` and the failing runs as
evidence; a failure no single host explains is reported, never blamed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provision.bisect.planner import AdaptivePlanner, Finding, GridPlanner, Planner, Test
from provision.health.errors import HealthError
from provision.ssh import SshSettings, run_command
from provision.ssh.errors import SshError
from provision.state import State, StateStore

COMMAND = "bisect"
REASON = "bisect_culprit"
_TAIL = 1500


def render_job(template: str, hosts: Sequence[str]) -> str:
    try:
        return template.format(
            hosts=",".join(hosts), hosts_space=" ".join(hosts), nnodes=len(hosts), first=hosts[0]
        )
    except (KeyError, IndexError, ValueError) as exc:
        raise HealthError(
            f"--cmd: bad placeholder ({exc}); use {{hosts}}, {{hosts_space}}, {{nnodes}}, {{first}} "
            "and double any other braces"
        ) from None


@dataclass(frozen=True)
class JobRun:
    round: int
    test: Test
    passed: bool
    rc: int | None
    stdout_tail: str
    stderr_tail: str
    duration_s: float
    error: str | None = None  # machine-readable, when the launcher could not run the job at all

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "hosts": list(self.test.hosts),
            "suspects": list(self.test.suspects),
            "padding": list(self.test.padding),
            "passed": self.passed,
            "exit_status": self.rc,
            "error": self.error,
            "duration_s": round(self.duration_s, 2),
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }


@dataclass(frozen=True)
class BisectReport:
    hosts: tuple[str, ...]
    command: str
    strategy: str
    finding: Finding
    runs: tuple[JobRun, ...]
    duration_s: float
    recorded: tuple[str, ...] = field(default=())


async def _run_one(settings: SshSettings, template: str, test: Test, round_no: int, timeout_s: float) -> JobRun:
    started = time.monotonic()
    command = render_job(template, test.hosts)
    try:
        run = await run_command(settings.endpoint(test.hosts[0]), settings, command, timeout_s=timeout_s)
    except SshError as exc:
        return JobRun(round_no, test, False, None, "", str(exc)[-_TAIL:], time.monotonic() - started, exc.reason)
    return JobRun(
        round_no, test, run.rc == 0, run.rc, run.stdout[-_TAIL:], run.stderr[-_TAIL:], run.duration_s,
        None if run.rc is not None else "job_killed",
    )


def make_planner(strategy: str, hosts: Sequence[str], *, min_hosts: int, rounds: int) -> Planner:
    if strategy == "adaptive":
        return AdaptivePlanner(hosts, min_hosts=min_hosts, target_rounds=rounds)
    if strategy == "grid":
        return GridPlanner(hosts, min_hosts=min_hosts)
    raise HealthError(f"unknown strategy {strategy!r} (adaptive or grid)")


def bisect(
    hosts: Sequence[str],
    template: str,
    settings: SshSettings,
    *,
    strategy: str = "adaptive",
    min_hosts: int = 2,
    rounds: int = 3,
    timeout_s: float = 600.0,
    store: StateStore | None = None,
    progress: Callable[[int, list[JobRun]], None] | None = None,
) -> BisectReport:
    render_job(template, hosts[:2])  # a bad template fails before any job runs
    planner = make_planner(strategy, hosts, min_hosts=min_hosts, rounds=rounds)
    settings.prepare()
    started = time.monotonic()
    runs: list[JobRun] = []
    round_no = 0

    async def one_round(tests: list[Test]) -> list[JobRun]:
        return list(await asyncio.gather(*(_run_one(settings, template, t, round_no, timeout_s) for t in tests)))

    while tests := planner.next_round():
        round_no += 1
        done = asyncio.run(one_round(tests))
        runs.extend(done)
        planner.record({r.test.id: r.passed for r in done})
        if progress is not None:
            progress(round_no, done)
    finding = planner.finding()
    report = BisectReport(tuple(hosts), template, strategy, finding, tuple(runs), time.monotonic() - started)
    if store is not None and finding.culprits:
        record_culprits(store, report)
        report = BisectReport(report.hosts, template, strategy, finding, report.runs, report.duration_s,
                              finding.culprits)
    return report


def record_culprits(store: StateStore, report: BisectReport) -> None:
    for host in report.finding.culprits:
        failing = [r.as_dict() for r in report.runs if not r.passed and host in r.test.suspects]
        evidence = {
            "command": report.command,
            "strategy": report.strategy,
            "group": list(report.hosts),
            "runs": report.finding.runs,
            "rounds": report.finding.rounds,
            "failing_runs_with_this_host": failing,
        }
        store.transition(host, State.failed, command=COMMAND, reason=REASON, evidence=evidence)
