"""The one step runner: selection, bounded concurrency, per-host deadlines, triage, recording, progress."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from provision.cli import main
from provision.site.model import Host
from provision.state import State, StateStore
from provision.state.lifecycle import FLOW
from provision.steps.pipeline import ALL_STEPS, PIPELINE, remediation_for
from provision.steps.runner import HostFailure, HostResult, Recording, RunLimits, Step, run_step
from provision.steps.spec import StepSpec

SPEC = StepSpec(name="probe", run_by="test", summary="a step for tests", takes=(State.declared,),
                moves_to=(State.bmc_reachable,), writes=("serial",),
                reasons={"probe_refused": "fix the probe", "probe_*": "any other probe trouble"})


class ProbeStep(Step):
    """Each host's behaviour by name: ok, hang (past the deadline), fail, crash, skip (an illegal move)."""

    spec: ClassVar[StepSpec] = SPEC

    def __init__(self, store: StateStore | None) -> None:
        self.store = store
        self.running = 0
        self.most_at_once = 0

    async def work(self, host: Host, rec: Recording) -> dict[str, Any]:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            kind = host.hostname.split("-")[0]
            await asyncio.sleep(0.05)
            if kind == "hang":
                await asyncio.sleep(60)
            if kind == "fail":
                raise HostFailure("probe_refused", "the probe said no", {"said": "no"})
            if kind == "crash":
                raise ValueError("boom")
            if kind == "skip":  # a move the lifecycle does not allow from declared
                await rec.move(host.hostname, State.macs_harvested)
            if self.store is not None:
                await rec.move(host.hostname, State.bmc_reachable, {"probe": "ok"}, facts={"serial": "SN-1"})
            return {"ok": True}
        finally:
            self.running -= 1


def _host(name: str) -> Host:
    return Host.model_validate({"hostname": name, "u": 1, "role": "gpu", "class": "c", "rack": "r1",
                                "bmc": {"address": "127.0.0.1", "credential": "bmc"}})


def _store(tmp_path: Path, names: list[str]) -> StateStore:
    store = StateStore(tmp_path / "s.db", actor="test")
    store.sync_site((n, "r1") for n in names)
    return store


def test_one_hung_host_meets_its_deadline_while_the_others_finish(tmp_path: Path) -> None:
    names = ["ok-1", "hang-1", "ok-2", "fail-1", "crash-1"]
    store = _store(tmp_path, names)
    seen: list[HostResult] = []
    started = time.monotonic()
    results = asyncio.run(run_step(ProbeStep(store), store, [_host(n) for n in names], RunLimits(8, 0.5),
                                   progress=seen.append))
    assert time.monotonic() - started < 5
    by = {r.host: r for r in results}
    assert by["ok-1"].ok and by["ok-1"].state is State.bmc_reachable
    assert (by["hang-1"].reason, by["fail-1"].reason, by["crash-1"].reason) == (
        "step_timeout", "probe_refused", "step_error")
    assert by["fail-1"].remediation == "fix the probe"
    assert sorted(r.host for r in seen) == sorted(names)
    failed = store.get("fail-1")
    assert (failed.state, failed.reason) == (State.failed, "probe_refused")
    assert failed.evidence == {"said": "no", "detail": "the probe said no"}
    assert store.facts("ok-2").serial == "SN-1"


def test_concurrency_is_bounded_and_a_rerun_skips_hosts_already_done(tmp_path: Path) -> None:
    names = [f"ok-{i}" for i in range(12)]
    store = _store(tmp_path, names)
    step = ProbeStep(store)
    asyncio.run(run_step(step, store, [_host(n) for n in names], RunLimits(3, 5.0)))
    assert step.most_at_once == 3
    again = asyncio.run(run_step(ProbeStep(store), store, [_host(n) for n in names], RunLimits(3, 5.0)))
    assert all(r.skipped and r.ok for r in again)
    assert all(r.detail == "nothing to do: bmc_reachable" for r in again)


def test_a_move_the_store_refuses_is_reported_not_recorded(tmp_path: Path) -> None:
    store = _store(tmp_path, ["skip-1"])
    [result] = asyncio.run(run_step(ProbeStep(store), store, [_host("skip-1")], RunLimits(1, 5.0)))
    assert not result.ok and result.reason == "not_recorded" and "skips bmc_reachable" in result.detail
    assert store.get("skip-1").state is State.declared


def test_a_run_without_a_store_records_nothing_and_cannot_select(tmp_path: Path) -> None:
    [result] = asyncio.run(run_step(ProbeStep(None), None, [_host("fail-1")], RunLimits(1, 5.0),
                                    record_failures=False, select=False))
    assert result.reason == "probe_refused" and result.state is None
    with pytest.raises(Exception, match="neither select nor record"):
        asyncio.run(run_step(ProbeStep(None), None, [_host("ok-1")], RunLimits(1, 5.0)))


def test_a_wildcard_reason_gets_its_remediation() -> None:
    assert SPEC.remediation("probe_cable") == "any other probe trouble"
    assert SPEC.remediation("probe_refused") == "fix the probe"
    assert SPEC.remediation("other") == ""
    assert remediation_for("site_install_the_driver").startswith("a role's task failed")


def test_the_pipeline_leads_from_declared_to_golden_without_a_gap() -> None:
    reached = {State.declared}
    for spec in PIPELINE:
        assert any(s in reached for s in spec.takes), spec.name
        reached.update(spec.moves_to)
    skippable = {State.burned_in}  # passed over on sites that do not require burn-in (policy)
    assert set(FLOW) - reached <= skippable
    assert State.golden in reached
    assert len({s.name for s in ALL_STEPS}) == len(ALL_STEPS)


def test_provision_steps_prints_the_table_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["steps", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in rows][:3] == ["harvest-macs", "pxe-boot", "maas-deploy"]
    harvest = rows[0]
    assert harvest["moves_to"] == ["bmc_reachable", "macs_harvested"] and "pxe_mac" in harvest["writes"]
    assert harvest["reasons"]["bmc_auth"]
