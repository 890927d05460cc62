"""`fabric ports apply` and `reenable` follow each UFM job to its end (fabric/ufm/client.py `wait_job`).

Against the fake UFM of fakeufm.py, which runs each action as the Actions and Jobs REST APIs document
(REFERENCE-wave3 C: 202 with `Location: .../jobs/<id>`, the job `Running` then `Completed` or `Completed With
Errors`, sub-jobs under `parent_id`), with the port changed only when its job ends. Today's client read the
port right after the 202 and recorded such a disable as failed: the first test fails there.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fabric.ports.apply import ApplyReport, apply_plan
from fabric.ports.cli import ports_app  # registers cli_apply's commands
from fabric.ports.cli_apply import report_text
from fabric.ports.ledger import APPLY_FAILED, DISABLED, JOB_TIMEOUT, PLANNED, REENABLE_REFUSED, Ledger
from fabric.ports.plan import PlannedLink, PortPlan, plan_ports
from fabric.ports.reenable import reenable
from fabric.topology import End, Link, NodeType, Topology
from fabric.ufm.client import JOB_MAX_BODY, UfmActuator, UfmClient
from fabric.ufm.errors import UfmProtocolError
from fabric.ufm.events import iter_event_log
from fabric.ufm.jobs import job_id_from_location, one_job
from provision.site.credentials import Login, Secret
from provision.site.port_policy import PortPolicy
from provision.state import StateStore
from tests.fabric.ports.fakeufm import UfmState, fake_ufm
from tests.fabric.ports.helpers import NOW, down_line, ibsim_topology, uplinks
from tests.fabric.ports.test_apply_faults import PASSWORD

assert ports_app is not None


def _switch_links(top: Topology, n: int) -> list[Link]:
    return [ln for ln in top.links if all(top.nodes[e.guid].type is NodeType.SWITCH for e in (ln.a, ln.b))][:n]


def _plan(links: list[Link]) -> PortPlan:
    lines = [down_line(link, 0, f"11:00:{i:02d}") for i, link in enumerate(links)]
    return plan_ports(ibsim_topology(), iter_event_log(lines, "event.log"), [], [], PortPolicy(), NOW)


def _ticket(pl: PlannedLink) -> tuple[str, dict[str, str]]:
    return f"ticket {pl.a.name}", {}


def _apply(url: str, plan: PortPlan, ledger: Ledger, *, job_timeout_s: float = 10.0,
           parallel: int = 8) -> tuple[ApplyReport, float]:
    async def go() -> ApplyReport:
        async with UfmClient(url, Login("admin", Secret(PASSWORD)), timeout_s=2.0,
                             job_timeout_s=job_timeout_s) as client:
            return await apply_plan(plan, UfmActuator(client), ledger, apply=True, force=True, actor="t",
                                    ticket=_ticket, parallel=parallel)
    started = time.monotonic()
    report = asyncio.run(go())
    return report, time.monotonic() - started


def _name(end: End) -> str:
    return f"{end.guid}_{end.port}"


def test_a_disable_is_recorded_only_once_its_job_completed(tmp_path: Path) -> None:
    plan = _plan(uplinks(ibsim_topology(), 1))
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, job_s=0.6)
    with fake_ufm(state) as url:
        report, _took = _apply(url, plan, ledger)
    assert report.ok and [o.state for o in report.outcomes] == [DISABLED], report.outcomes[0].detail
    row = ledger.current()[report.outcomes[0].link]
    assert row.state == DISABLED and [e.done for e in row.ends] == ["disabled", "disabled"]
    assert all((e.job or "").startswith("UFM job ") and "Completed (seen after" in (e.job or "") for e in row.ends)
    assert "Completed (seen after" in row.detail and len(state.jobs) == 2 and state.job_polls >= 2


def test_a_job_that_fails_leaves_apply_failed_with_its_error_in_the_ledger_and_the_output(tmp_path: Path) -> None:
    links = uplinks(ibsim_topology(), 2)
    plan = _plan(links)
    second = plan.disable[1]
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, job_s=0.2, job_fate={_name(End(second.a.guid, second.a.port)): "fail"})
    with fake_ufm(state) as url:
        report, _took = _apply(url, plan, ledger)
        assert [o.state for o in report.outcomes] == [DISABLED, APPLY_FAILED] and report.stopped
        row = ledger.current()[report.outcomes[1].link]
        assert row.state == APPLY_FAILED and "disabled" not in [e.done for e in row.ends if e.name == second.a.name]
        failed = next(e for e in row.ends if e.name == second.a.name and e.port == second.a.port)
        assert (failed.done or "").startswith("failed: disable ") and "Completed With Errors: Failed to disable " \
            "port: switch did not answer (fake)" in (failed.done or "")
        text = report_text(report)
        assert "apply_failed" in text and "Completed With Errors" in text and "STOPPED: " in text

        state.job_polls = 0
        again, _took = _apply(url, plan, ledger)  # the fault was one job's: the rerun converges
    assert again.ok and [o.state for o in again.outcomes] == ["already_disabled", DISABLED]


def test_a_job_that_never_finishes_is_job_timeout_at_the_deadline_and_a_rerun_converges(tmp_path: Path) -> None:
    plan = _plan(uplinks(ibsim_topology(), 2))
    second = plan.disable[1]
    hung = End(second.a.guid, second.a.port)
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, job_s=0.1, job_fate={_name(hung): "hang"})
    with fake_ufm(state) as url:
        report, took = _apply(url, plan, ledger, job_timeout_s=1.5)
        assert [o.state for o in report.outcomes] == [DISABLED, JOB_TIMEOUT] and took < 4
        row = ledger.current()[report.outcomes[1].link]
        assert row.state == JOB_TIMEOUT
        done = {(e.guid, e.port): e.done or "" for e in row.ends}
        assert done[(hung.guid, hung.port)].startswith("job_timeout: disable ")
        assert "Running" in done[(hung.guid, hung.port)] and "after 1.5 s (the deadline)" in row.detail
        assert "job_timeout" in report_text(report)
        assert state.job_polls < 15  # backed off, not a busy loop
        assert _name(hung) not in state.disabled  # UFM has not done it

        again, _took = _apply(url, plan, ledger)
    assert again.ok and [o.state for o in again.outcomes] == ["already_disabled", DISABLED]
    assert [a for a in state.actions if a[1] == _name(hung)] == [("disable", _name(hung))] * 2


def test_twenty_ports_with_slow_jobs_run_concurrently_within_the_bound(tmp_path: Path) -> None:
    links = _switch_links(ibsim_topology(), 10)
    plan = _plan(links)
    assert len(plan.disable) == 10
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, job_s=0.5)
    with fake_ufm(state) as url:
        report, took = _apply(url, plan, ledger, parallel=8)
    assert report.ok and {o.state for o in report.outcomes} == {DISABLED} and len(state.actions) == 20
    assert 1 < state.peak <= 8  # one job per link at a time, at most `parallel` links
    assert took < 9, f"{took:.1f} s: the jobs ran one after the other (20 x 0.5 s = 10 s at least)"
    planned = sorted(r.at for r in ledger.history() if r.state == PLANNED)
    assert planned[1] - planned[0] > 0.9  # the first link went alone (both its jobs) before the rest


def test_a_202_without_a_job_and_an_oversized_job_answer_are_failures_never_disabled(tmp_path: Path) -> None:
    plan = _plan(uplinks(ibsim_topology(), 1))
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    with fake_ufm(UfmState("admin", PASSWORD, location=False)) as url:
        report, _took = _apply(url, plan, ledger)
    assert [o.state for o in report.outcomes] == [APPLY_FAILED]
    assert "without a Location" in (report.stopped or "")
    big = UfmState("admin", PASSWORD, fail_summary="x" * JOB_MAX_BODY, job_fate={
        _name(End(e.guid, e.port)): "fail" for pl in plan.disable for e in (pl.a, pl.b) if e is not None})
    with fake_ufm(big) as url:
        report, _took = _apply(url, plan, Ledger(StateStore(tmp_path / "other.db")))
    assert [o.state for o in report.outcomes] == [APPLY_FAILED] and "answer larger than" in (report.stopped or "")


def test_reenable_whose_enable_job_fails_is_refused_and_stays_disabled(tmp_path: Path) -> None:
    plan = _plan(uplinks(ibsim_topology(), 1))
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, job_s=0.1)
    with fake_ufm(state) as url:
        report, _took = _apply(url, plan, ledger)
        entry = ledger.current()[report.outcomes[0].link]
        state.job_fate.update({_name(End(e.guid, e.port)): "fail" for e in entry.ends})

        async def go() -> tuple[bool, tuple[str, ...]]:
            async with UfmClient(url, Login("admin", Secret(PASSWORD)), timeout_s=2.0) as client:
                async def counters(_end: End) -> dict[str, int]:
                    return {}
                result = await reenable(entry, UfmActuator(client), ledger, counters, actor="t", window_s=0.1,
                                        train_s=0.2)
                return result.ok, result.findings
        ok, findings = asyncio.run(go())
    assert not ok and "Completed With Errors" in findings[0]
    assert ledger.find(entry.link).state == REENABLE_REFUSED and len(state.disabled) == 2


@pytest.mark.parametrize(("location", "job_id"), [("/ufmRest/jobs/12", "12"), ("https://ufm:443/ufmRest/jobs/7", "7")])
def test_the_job_id_is_the_last_segment_of_location(location: str, job_id: str) -> None:
    """batch_isolate_devices.py / helpers.py: `location.split('/')[-1]`."""
    assert job_id_from_location(location, "POST") == job_id


def test_a_location_or_a_job_answer_that_is_not_a_job_is_a_protocol_error() -> None:
    with pytest.raises(UfmProtocolError):
        job_id_from_location("/ufmRest/resources/ports", "POST")
    assert one_job([], "3", "GET") is None  # Jobs REST API: an unknown id is an empty list
    with pytest.raises(UfmProtocolError):
        one_job({"ID": "4", "Status": "Running"}, "3", "GET")
    with pytest.raises(UfmProtocolError):
        one_job({"Status": "Running"}, "3", "GET")
