"""Reconciling links a cut-short run left in flight, through the UFM client against a small UFM on loopback.

Each case is a ledger whose latest row for the link is an intent (`planned`, `reenabling`) and a UFM whose
ports are as the killed run left them; what the reconcile reads, sends and records is checked against both.
The kill itself, at each point, is in test_kill_points_ufm.py; these pin each outcome on its own, quickly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.ports.apply import apply_plan
from fabric.ports.ledger import (
    APPLY_FAILED,
    DISABLED,
    PLANNED,
    REENABLING,
    Ledger,
    LedgerEnd,
    LedgerEntry,
    link_id,
)
from fabric.ports.reconcile import Reconciled, in_flight, reconcile
from fabric.ports.step import down_links_by_host, link_is_down
from fabric.ufm.client import UfmActuator, UfmClient
from provision.site.credentials import Login, Secret
from provision.state import StateStore
from tests.fabric.ports.fakeufm import UfmState, fake_ufm
from tests.fabric.ports.helpers import down_line, ibsim_topology, plan_from_lines, uplinks

PASSWORD = "ufm-Pa55-reconcile"
HCA = LedgerEnd("b8599f0300000210", 1, "gpu-r1-05/mlx5_1", False, "row A rack r1 U5")
SWITCH = LedgerEnd("0c42a10300000010", 5, "leaf-A-r3-U38", True, "row A rack r3 U38", "1/5")
ENDS = (HCA, SWITCH)
NAMES = {e: f"{e.guid}_{e.port}" for e in ENDS}


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with StateStore(tmp_path / "state.db") as store:
        yield Ledger(store)


def _intent(ledger: Ledger, state: str) -> LedgerEntry:
    ledger.record(LedgerEntry(link_id(ENDS), 0.0, "ops", "fabric ports apply", DISABLED if state == REENABLING
                              else "apply_failed", "ufm", "1 counted event(s)", ENDS, ticket="the ticket"))
    return ledger.record(LedgerEntry(link_id(ENDS), 0.0, "ops", "fabric ports apply", state, "ufm",
                                     "1 counted event(s)", ENDS, ticket="the ticket"))


def _reconcile(ledger: Ledger, ufm: UfmState) -> tuple[Reconciled, ...]:
    async def go(url: str) -> tuple[Reconciled, ...]:
        async with UfmClient(url, Login("admin", Secret(PASSWORD)), timeout_s=1.0) as client:
            return await reconcile(ledger, UfmActuator(client), actor="t")
    with fake_ufm(ufm) as url:
        return asyncio.run(go(url))


def _done(entry: LedgerEntry) -> dict[str, str]:
    return {e.name: e.done or "" for e in entry.ends}


def test_a_link_found_disabled_at_both_ends_is_recorded_disabled_and_nothing_is_sent(ledger: Ledger) -> None:
    _intent(ledger, PLANNED)
    ufm = UfmState("admin", PASSWORD, disabled={NAMES[HCA], NAMES[SWITCH]})
    [done] = _reconcile(ledger, ufm)
    row = ledger.current()[link_id(ENDS)]
    assert (done.was, done.state, done.row) == (PLANNED, DISABLED, row.id) and ufm.actions == []
    assert set(_done(row).values()) == {"already disabled (nothing sent) (found disabled after an interrupted run)"}
    assert row.evidence[-1]["kind"] == "reconciled" and "interrupted run" in row.evidence[-1]["text"]
    assert row.ticket == "the ticket" and row.command == "fabric ports reconcile" and in_flight(ledger) == []


def test_a_link_half_disabled_is_finished(ledger: Ledger) -> None:
    _intent(ledger, PLANNED)
    ufm = UfmState("admin", PASSWORD, disabled={NAMES[HCA]})
    [done] = _reconcile(ledger, ufm)
    row = ledger.current()[link_id(ENDS)]
    assert done.state == DISABLED and ufm.actions == [("disable", NAMES[SWITCH])]
    assert _done(row) == {HCA.name: "already disabled (nothing sent) (found disabled after an interrupted run)",
                          SWITCH.name: "disabled"}


def test_a_link_untouched_is_recorded_not_done_and_nothing_is_sent(ledger: Ledger) -> None:
    _intent(ledger, PLANNED)
    ufm = UfmState("admin", PASSWORD)
    [done] = _reconcile(ledger, ufm)
    row = ledger.current()[link_id(ENDS)]
    assert done.state == APPLY_FAILED and ufm.actions == [] and not link_is_down(row)
    assert all(d.startswith("not done") for d in _done(row).values())
    assert "found every end up: nothing was done" in row.detail


def test_an_unproven_reenable_is_disabled_again(ledger: Ledger) -> None:
    _intent(ledger, REENABLING)
    ufm = UfmState("admin", PASSWORD, disabled={NAMES[HCA]})  # killed after the switch end came up
    [done] = _reconcile(ledger, ufm)
    row = ledger.current()[link_id(ENDS)]
    assert (done.was, done.state) == (REENABLING, DISABLED) and ufm.actions == [("disable", NAMES[SWITCH])]
    assert "the repair was never proven" in row.detail and link_is_down(row)


def test_ports_that_cannot_be_read_leave_the_link_in_flight(ledger: Ledger) -> None:
    _intent(ledger, PLANNED)
    ufm = UfmState("admin", PASSWORD, fault="503")
    [done] = _reconcile(ledger, ufm)
    assert done.row is None and done.state == PLANNED and "could not be read through ufm" in done.detail
    assert [e.state for e in in_flight(ledger)] == [PLANNED] and ufm.actions == []


def test_a_host_behind_a_link_in_flight_is_out_of_service(ledger: Ledger) -> None:
    for state in (PLANNED, REENABLING):
        entry = _intent(ledger, state)
        assert link_is_down(entry)  # no end marked done yet: still never golden
        assert down_links_by_host([entry], {}) == {"gpu-r1-05": [entry]}


def test_the_hold_comes_before_the_planned_row_and_before_any_port(ledger: Ledger) -> None:
    """`apply_plan` hands each link's `planned` row to `hold` (the hosts behind it leave golden) before it is
    written and before anything is sent: a kill at any later point leaves no host behind it golden."""
    plan = plan_from_lines([down_line(link) for link in uplinks(ibsim_topology(), 1)])
    ufm = UfmState("admin", PASSWORD)
    seen: list[tuple[str, str | None, int]] = []

    async def hold(row: LedgerEntry) -> None:
        latest = ledger.current().get(row.link)
        seen.append((row.state, latest.state if latest else None, len(ufm.actions)))

    async def go(url: str) -> None:
        async with UfmClient(url, Login("admin", Secret(PASSWORD)), timeout_s=1.0) as client:
            await apply_plan(plan, UfmActuator(client), ledger, apply=True, force=False, actor="t",
                             ticket=lambda pl: ("ticket", {}), hold=hold)
    with fake_ufm(ufm) as url:
        asyncio.run(go(url))
    assert seen == [(PLANNED, None, 0)]
    assert [r.state for r in ledger.history()] == [PLANNED, DISABLED] and len(ufm.actions) == 2
