"""Hosts follow their ports: the `ports` step fails a host behind a down ledger link (ib_port_disabled,
naming the link and its ledger row), leaves it failed while the link is down, and sends it back to
`configured` once the link is re-enabled, so health (and burn-in) must earn golden again."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from fabric.ports.ledger import APPLY_FAILED, DISABLED, REENABLE_REFUSED, REENABLED, Ledger, LedgerEnd, LedgerEntry
from fabric.ports.step import REASON, hosts_follow, link_is_down
from provision.cli import main as provision_main
from provision.errors import IllegalTransition
from provision.health.step import skip_reason as health_skip_reason
from provision.site import load_site
from provision.site.model import Site
from provision.state import State, StateStore
from provision.state.lifecycle import check_transition
from provision.steps.pipeline import remediation_for
from tests.sites import copy_sim_site

HCA = LedgerEnd("b8599f0300000210", 1, "gpu-r1-05/mlx5_1", False, "row A rack r1 U18")
SWITCH = LedgerEnd("0c42a10300000010", 5, "leaf-A-r3-U38", True, "row A rack r3 U38")
LINK = "0x0c42a10300000010[5]-0xb8599f0300000210[1]"


def _row(state: str, done: str = "disabled") -> LedgerEntry:
    ends = tuple(LedgerEnd(e.guid, e.port, e.name, e.is_switch, e.location, done=done) for e in (HCA, SWITCH))
    return LedgerEntry(LINK, time.time(), "t", "fabric ports apply", state, "ufm", "1 counted event(s)", ends)


@pytest.fixture
def site(tmp_path: Path) -> tuple[Site, StateStore]:
    site = load_site(copy_sim_site(tmp_path / "sim"))
    store = StateStore(tmp_path / "state.db")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    for host in ("gpu-r1-05", "gpu-r1-04"):
        store.mark(host, State.golden, reason="test: a golden host")
    return site, store


def _follow(site: Site, store: StateStore) -> dict[str, State | None]:
    results = asyncio.run(hosts_follow(site, store, list(Ledger(store).current().values())))
    return {r.host: r.state for r in results}


def test_a_disabled_link_fails_its_host_and_a_reenabled_one_sends_it_back_to_health(
        site: tuple[Site, StateStore]) -> None:
    s, store = site
    ledger = Ledger(store)
    row = ledger.record(_row(DISABLED))
    assert _follow(s, store) == {"gpu-r1-05": State.failed}
    rec = store.get("gpu-r1-05")
    assert rec.reason == REASON and rec.resume_from is State.golden
    assert rec.evidence["links"][0]["link"] == LINK and rec.evidence["links"][0]["ledger_id"] == row.id
    assert "gpu-r1-05/mlx5_1[1] <-> leaf-A-r3-U38[5]" in rec.evidence["detail"]
    assert "fabric ports reenable" in remediation_for(REASON)
    assert store.get("gpu-r1-04").state is State.golden
    with pytest.raises(IllegalTransition):
        check_transition(State.failed, State.golden, rec.resume_from)  # golden is earned again
    assert health_skip_reason(store, rec) is not None  # not a health failure: health leaves it alone

    assert _follow(s, store) == {}  # still down: nothing moves, nothing is written twice
    ledger.record(_row(REENABLE_REFUSED))
    assert _follow(s, store) == {} and store.get("gpu-r1-05").state is State.failed

    back = ledger.record(_row(REENABLED, done="enabled"))
    assert _follow(s, store) == {"gpu-r1-05": State.configured}
    rec = store.get("gpu-r1-05")
    assert rec.state is State.configured and health_skip_reason(store, rec) is None
    assert store.history("gpu-r1-05")[-1].evidence["reenabled"][0]["ledger_id"] == back.id
    assert _follow(s, store) == {}


def test_an_apply_that_failed_before_touching_the_link_moves_no_host(site: tuple[Site, StateStore]) -> None:
    s, store = site
    assert not link_is_down(_row(APPLY_FAILED, done="not attempted"))
    assert link_is_down(_row(APPLY_FAILED, done="disabled"))
    Ledger(store).record(_row(APPLY_FAILED, done="not attempted"))
    assert _follow(s, store) == {} and store.get("gpu-r1-05").state is State.golden


def test_status_shows_the_reason(site: tuple[Site, StateStore], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    s, store = site
    Ledger(store).record(_row(DISABLED))
    _follow(s, store)
    os.environ["BRINGUP_STATE_DB"] = str(tmp_path / "state.db")
    try:
        capsys.readouterr()
        assert provision_main(["status", "--site", str(s.path)]) == 0
    finally:
        del os.environ["BRINGUP_STATE_DB"]
    out = capsys.readouterr().out
    assert "gpu-r1-05" in out and REASON in out
