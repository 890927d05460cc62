"""The burn-in as a lifecycle step: hosts whose every HCA link passed move to `burned_in`, hosts with a failed
link to `failed(burnin_link_failed)`; hosts the run could not judge (unknown, not covered) are left where
they are, with why. Then `golden` as the site's policy says (`provision.golden.step`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from fabric.burnin.judge import FAIL, PASS, HostVerdict
from provision.golden.step import promote_golden
from provision.site.model import Host, Site
from provision.state import HostRecord, Move, StateStore
from provision.state.lifecycle import State
from provision.steps.pipeline import BURN_IN
from provision.steps.runner import HostFailure, HostResult, Recording, RunLimits, Step, run_step


class BurnInStep(Step):
    spec = BURN_IN

    def __init__(self, store: StateStore, verdicts: Mapping[str, HostVerdict], run: int) -> None:
        self.store = store
        self.verdicts = verdicts
        self.run_id = run

    @property
    def command(self) -> str:
        return f"burn-in run {self.run_id}"

    def limits(self) -> RunLimits:
        return RunLimits.of(self.spec)

    def skip_reason(self, record: HostRecord) -> str | None:
        verdict = self.verdicts.get(record.hostname)
        if verdict is None:
            return "not in this burn-in run"
        if verdict.verdict not in (PASS, FAIL):
            return f"burn-in {verdict.verdict}: {verdict.reason}"
        return super().skip_reason(record)

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        verdict = self.verdicts[host.hostname]
        if verdict.verdict == FAIL:
            raise HostFailure("burnin_link_failed", verdict.reason, {"run": self.run_id, "verdict": verdict.reason})
        # The HCAs it proved are the host's facts from here on (what UFM and ibnetdiscover name them by).
        facts = {"hca_guids": list(verdict.hca_guids)} if verdict.hca_guids else None
        outcome = await rec.move(host.hostname, State.burned_in, {"run": self.run_id, "verdict": verdict.reason},
                                 facts=facts)
        return {"changed": outcome.changed, "reason": verdict.reason}


def record_verdicts(site: Site, store: StateStore, verdicts: Sequence[HostVerdict], run: int,
                    ) -> tuple[list[HostResult], list[Move]]:
    """Move the judged hosts (burned_in or failed), then promote to golden whoever is now eligible."""
    by_host = {v.host: v for v in verdicts}
    hosts = [h for h in site.hosts() if h.hostname in by_host]
    step = BurnInStep(store, by_host, run)
    results = asyncio.run(run_step(step, store, hosts, step.limits()))
    burned = [r.host for r in results if r.ok and not r.skipped]
    golden = promote_golden(site, store, burned) if burned else []
    return results, golden
