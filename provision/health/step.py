"""The health step of the step table: the node agent over SSH on every host, judged and recorded.

Every host gets a verdict, whatever happens to it: an SSH failure, a hang past the per-host timeout,
garbled output or a bug here all end as "unknown" for that host alone, never as a crash of the run.
A host is checked once it is `configured` (or further along), and when it `failed` a health check
before (so a repaired host can recover). Healthy hosts move to `healthy` (a host already past it stays
where it is); every other verdict, unknown included, fails the host with the most severe problem as
the reason and the agent's report as evidence.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from provision.health.agent_command import agent_command, agent_program
from provision.health.expectations import load_overlay, render_expectations, validate_expectations
from provision.health.verdict import HostHealth, Problem, Verdict, judge, unreachable
from provision.site.model import Host, Site
from provision.ssh import SshSettings, run_command
from provision.ssh.errors import SshError
from provision.state import HostRecord, Move, State, StateStore, reached
from provision.steps.pipeline import HEALTH
from provision.steps.runner import HostFailure, Recording, RunLimits, Step

COMMAND_PREFIX = "health"
_GRACE_S = 5.0  # past the SSH run's own timeout, which ends as a verdict of its own (health_timeout)


def command_name(level: str) -> str:
    return f"{COMMAND_PREFIX} {level}"


def health_evidence(result: HostHealth, level: str) -> dict[str, Any]:
    if result.verdict is not Verdict.healthy:
        return {"level": level, **result.evidence, "duration_s": round(result.duration_s, 3)}
    report = result.evidence.get("report", {})
    checks = [
        {"check": c.get("check"), "status": c.get("status"), "summary": c.get("summary")}
        for c in report.get("checks", [])
        if isinstance(c, dict)
    ]
    return {"level": level, "verdict": "healthy", "checks": checks, "duration_s": round(result.duration_s, 3)}


def skip_reason(store: StateStore, record: HostRecord) -> str | None:
    """None when a health run may act on the host, else why not."""
    if record.state is State.failed:
        history = store.history(record.hostname)
        if history and history[-1].command.startswith(COMMAND_PREFIX):
            return None
        return f"failed ({record.reason}) outside a health check: repair it first"
    if reached(record.state, State.configured):
        return None
    return f"{record.state.value}: not configured yet"


@dataclass(frozen=True)
class HealthRun:
    """How one health run goes: the level, the SSH settings, its bounds, and whether it records."""

    level: str
    settings: SshSettings
    concurrency: int
    timeout_s: float
    agent: str | None = None  # how the agent is started (default: $BRINGUP_HEALTH_AGENT, else the role's install)
    record: bool = True


class HealthStep(Step):
    spec = HEALTH

    def __init__(self, site: Site, store: StateStore | None, run: HealthRun) -> None:
        self.site = site
        self.store = store
        self.run_options = run
        self.level = run.level
        self.record = run.record
        # The long level re-runs the fast checks too: a host is never called healthy on its long checks alone.
        self.agent_level = "all" if run.level == "long" else run.level
        self.agent_command = agent_command(self.agent_level, run.agent or agent_program())
        self.verdicts: dict[str, HostHealth] = {}
        self.moves: list[Move] = []
        self._configs: dict[str, bytes] = {}

    @property
    def command(self) -> str:
        return command_name(self.level)

    def limits(self) -> RunLimits:
        return RunLimits(self.run_options.concurrency, self.run_options.timeout_s)

    def deadline_s(self, host_timeout_s: float) -> float:
        return host_timeout_s + _GRACE_S

    def skip_reason(self, record: HostRecord) -> str | None:
        assert self.store is not None
        return skip_reason(self.store, record)

    async def prepare(self, hosts: Sequence[Host]) -> None:
        overlay = load_overlay(self.site)
        rendered = {h.hostname: render_expectations(self.site, h, self.level, overlay) for h in hosts}
        checked: set[str] = set()
        for host in hosts:
            if host.host_class not in checked:
                validate_expectations(rendered[host.hostname], f"host class {host.host_class!r} ({self.level} checks)")
                checked.add(host.host_class)
        self._configs = {name: json.dumps(config).encode() for name, config in rendered.items()}
        self.run_options.settings.prepare()

    async def check(self, host: Host) -> HostHealth:
        """The agent's verdict on one host; never raises."""
        started = time.monotonic()
        try:
            settings = self.run_options.settings
            run = await run_command(settings.endpoint(host.hostname), settings, self.agent_command,
                                    stdin=self._configs[host.hostname], timeout_s=self.run_options.timeout_s)
            return judge(run, expected_host=host.hostname, level=self.agent_level)
        except SshError as exc:
            return unreachable(host.hostname, exc, time.monotonic() - started)
        except Exception as exc:  # one host's surprise must not stop the others
            message = f"controller error: {type(exc).__name__}: {exc}"
            return HostHealth(host.hostname, Verdict.unknown, "controller_error", message,
                              (Problem("controller", "unknown", "controller_error", message),),
                              time.monotonic() - started,
                              {"verdict": "unknown", "error": "controller_error", "message": message})

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        result = self.verdicts[host.hostname] = await self.check(host)
        if result.verdict is not Verdict.healthy:
            remediation = next((p.remediation for p in result.problems if p.remediation), None)
            raise HostFailure(result.reason or "health_check_failed", result.summary, {}, remediation)
        if self.record:
            self.moves.append(await rec.move(host.hostname, State.healthy, health_evidence(result, self.level)))
        return {"verdict": result.verdict.value, "summary": result.summary}

    def failure_evidence(self, host: Host, failure: HostFailure) -> dict[str, Any]:
        result = self.verdicts.get(host.hostname)
        if result is None:  # failed before the agent gave a verdict (a deadline, a bug here)
            return {"level": self.level, "verdict": "unknown", "error": failure.reason, "message": failure.detail}
        return health_evidence(result, self.level)


class KnownVerdicts(HealthStep):
    """Records verdicts reached elsewhere (the hosts' own timers, a saved run) exactly as a run would."""

    def __init__(self, site: Site, store: StateStore | None, level: str, verdicts: Sequence[HostHealth]) -> None:
        super().__init__(site, store, HealthRun(level, SshSettings.from_site(site), concurrency=64, timeout_s=60.0))
        self._given = {v.host: v for v in verdicts}

    async def prepare(self, hosts: Sequence[Host]) -> None:
        return None

    async def check(self, host: Host) -> HostHealth:
        return self._given[host.hostname]
