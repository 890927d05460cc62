"""`apply_plan` through the UFM client against a hostile UFM: 401, 503 and a hang mid-apply, the caps.

Each fault hits after the first port of the first link was disabled: the run stops with a clear error,
the ledger's row says which end was disabled and which was not, the links after it have no row, and a
rerun against the healed UFM finishes without sending any port twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fabric.ports.apply import ApplyReport, apply_plan
from fabric.ports.ledger import APPLY_FAILED, DISABLED, PLANNED, Ledger
from fabric.ports.plan import PlannedLink, PortPlan
from fabric.ufm.client import UfmActuator, UfmClient
from provision.site.credentials import Login, Secret
from provision.site.port_policy import PortPolicy
from provision.state import StateStore
from tests.fabric.ports.fakeufm import UfmState, fake_ufm
from tests.fabric.ports.helpers import down_line, ibsim_topology, plan_from_lines, uplinks

PASSWORD = "ufm-Pa55-test"


def _ticket(pl: PlannedLink) -> tuple[str, dict[str, str]]:
    return f"ticket {pl.a.name}", {}


def _apply(url: str, plan: PortPlan, ledger: Ledger, *, apply: bool = True, force: bool = False) -> ApplyReport:
    async def go() -> ApplyReport:
        async with UfmClient(url, Login("admin", Secret(PASSWORD)), timeout_s=0.5) as client:
            return await apply_plan(plan, UfmActuator(client), ledger, apply=apply, force=force, actor="t",
                                    ticket=_ticket)
    return asyncio.run(go())


@pytest.mark.parametrize(("fault", "says"), [("401", "UFM refused the credential (HTTP 401)"),
                                             ("503", "UFM answered HTTP 503"),
                                             ("hang", "UFM did not answer within 0.5 s")])
def test_a_fault_mid_apply_is_recorded_and_a_rerun_converges(fault: str, says: str, tmp_path: Path) -> None:
    plan = plan_from_lines([down_line(link) for link in uplinks(ibsim_topology(), 2)])
    assert len(plan.disable) == 2 and not plan.needs_force
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD, fault=fault, fail_after=1, hang_s=1.0)
    with fake_ufm(state) as url:
        first = _apply(url, plan, ledger)
        assert first.stopped is not None and says in first.stopped and PASSWORD not in first.stopped
        assert [o.state for o in first.outcomes] == [APPLY_FAILED]
        rows = ledger.history()
        assert [r.state for r in rows] == [PLANNED, APPLY_FAILED] and len(state.actions) == 1
        done = {e.key(): e.done or "" for e in rows[-1].ends}
        assert sorted(d.split(":")[0] for d in done.values()) == ["disabled", "failed"], done
        assert says in rows[-1].detail
        assert {r.link for r in rows} == {first.outcomes[0].link}  # the second link: no row, untouched

        state.heal()
        second = _apply(url, plan, ledger)
    assert second.ok and [o.state for o in second.outcomes] == [DISABLED, DISABLED]
    again = [e.done for e in ledger.current()[first.outcomes[0].link].ends]
    assert "already disabled (nothing sent)" in again and "disabled" in again
    sent = [name for _action, name in state.actions]
    assert len(sent) == 4 and len(set(sent)) == 4  # each of the four ports sent exactly once


def test_a_wave_above_the_cap_applies_nothing_without_force(tmp_path: Path) -> None:
    links = uplinks(ibsim_topology(), 3)
    plan = plan_from_lines([down_line(link, i) for i, link in enumerate(links)], PortPolicy(max_ports=4))
    assert plan.needs_force and "6 ports to disable > the cap of 4 per run" in plan.cap.reasons()
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD)
    with fake_ufm(state) as url:
        refused = _apply(url, plan, ledger)
        assert not refused.ok and refused.refused and not refused.outcomes
        assert state.actions == [] and ledger.history() == []
        forced = _apply(url, plan, ledger, force=True)
    assert forced.ok and len(forced.outcomes) == 3 and len(state.actions) == 6


def test_a_restart_burst_of_10000_link_downs_disables_nothing(tmp_path: Path) -> None:
    top = ibsim_topology()
    links = list(top.links)
    lines = [down_line(links[i % len(links)], i // 10) for i in range(10_000)]  # all within one second
    plan = plan_from_lines(lines)
    assert plan.disable == () and plan.summary["events_in_bursts"] == 10_000 and not plan.needs_force
    ledger = Ledger(StateStore(tmp_path / "state.db"))
    state = UfmState("admin", PASSWORD)
    with fake_ufm(state) as url:
        report = _apply(url, plan, ledger)
    assert report.ok and report.outcomes == () and state.actions == [] and ledger.history() == []
