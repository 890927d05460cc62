"""Apply, ledger and re-enable against the simulated fabric in ibsim, with the real ibportstate/perfquery.

One fabric for the module (ibsim starts in well under a second): a dry run changes nothing; an apply
disables a leaf-spine link (both ends) and a host link (its switch end: in-band cannot re-enable an HCA
it no longer reaches), verified by the next ibnetdiscover; a rerun sends nothing; an ibportstate that fails
leaves `apply_failed` and a rerun converges; re-enable refuses a link that does not train and accepts one
that was repaired (re-cabled through ibsim's console).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fabric.design import Design
from fabric.diags import Diags
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.actuate import IbPortState, attach_guid, dr_path, lids_from_ibnetdiscover
from fabric.ports.apply import apply_plan
from fabric.ports.ledger import APPLY_FAILED, DISABLED, REENABLE_REFUSED, REENABLED, Ledger
from fabric.ports.plan import PlannedLink, PortPlan, plan_ports
from fabric.ports.reenable import reenable
from fabric.topology import End, Topology
from fabric.ufm.events import iter_event_log
from provision.site.port_policy import PortPolicy
from provision.state import StateStore
from sim.ibfabric import IbFabric
from sim.ibfabric.diags_prefix import sim_diags
from sim.ibfabric.routing import route

pytestmark = pytest.mark.tools("ibsim", "ibportstate")
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEAF, SPINE, HCA = "0c42a10300000000", "0c42a10300000080", "b8599f0300000000"  # leaf-A-r3-U40, spine, r1-01 mlx5_0


@pytest.fixture(scope="module")
def fabric(sim_design: Design) -> Iterator[IbFabric]:
    with IbFabric(sim_design) as f:
        route(f)
        yield f


def _links(f: IbFabric) -> Topology:
    return parse_ibnetdiscover(f.discover())


def _plan(f: IbFabric, design: Design) -> PortPlan:
    top = _links(f)
    spine_port = next(p for p, far in top.adjacency[LEAF] if far.guid == SPINE)
    far = next(far for p, far in top.adjacency[LEAF] if p == spine_port)
    log = (f"2026-12-01 11:00:00.000 [1] [329] WARNING [Fabric_Topology] Link [Source {LEAF}_{spine_port}  TO "
           f"Dest: {SPINE}_{far.port}]: Link went down\n"
           f"2026-12-01 11:00:05.000 [2] [110] WARNING [Hardware] IBPort [default(34) / Switch: leaf / NA / 1] "
           f"[dev_id: {LEAF}]: Symbol error counter rate threshold exceeded\n")
    return plan_ports(top, iter_event_log(log.splitlines(), "event.log"), [], [], PortPolicy(), NOW, design)


def _ticket(pl: PlannedLink) -> tuple[str, dict[str, str]]:
    return f"ticket {pl.a.name}", {"expected": "4X HDR"}


def _actuator(f: IbFabric) -> IbPortState:
    return IbPortState(f.discover, sim_diags(f.socket))


def test_directed_routes_and_lids_come_from_the_capture(fabric: IbFabric) -> None:
    text = fabric.discover()
    top = parse_ibnetdiscover(text)
    start = attach_guid(text)
    lids = lids_from_ibnetdiscover(text)
    assert start == LEAF and lids[HCA] > 0 and lids[LEAF] > 0 and len(set(lids.values())) == len(lids)
    assert dr_path(top, LEAF, LEAF, frozenset()) == "0"
    path = dr_path(top, LEAF, SPINE, frozenset())
    assert path is not None and path.count(",") == 1
    direct = frozenset(End(LEAF, p) for p, far in top.adjacency[LEAF] if far.guid == SPINE)  # parallel links
    detour = dr_path(top, LEAF, SPINE, direct)
    assert detour is not None and detour.count(",") == 3  # leaf -> other spine -> other leaf -> spine


def test_dry_run_apply_rerun_failure_and_reenable(fabric: IbFabric, sim_design: Design, tmp_path: Path) -> None:
    plan = _plan(fabric, sim_design)
    assert len(plan.disable) == 2, plan.summary
    ledger = Ledger(StateStore(tmp_path / "state.db", actor="tester"))
    before = len(_links(fabric).links)

    dry = asyncio.run(apply_plan(plan, _actuator(fabric), ledger, apply=False, force=False, actor="t",
                                 ticket=_ticket))
    assert not dry.applied and {o.state for o in dry.outcomes} == {"planned"}
    assert ledger.history() == [] and len(_links(fabric).links) == before

    broken = _actuator(fabric)
    broken.diags = Diags(prefix=("sh", "-c", "echo 'ibwarn: mad_rpc: _do_madrpc failed' >&2; exit 255", "ibportstate"))
    failed = asyncio.run(apply_plan(plan, broken, ledger, apply=True, force=False, actor="t", ticket=_ticket))
    assert failed.stopped and [o.state for o in failed.outcomes] == ["apply_failed"]
    assert [e.state for e in ledger.history()] == ["planned", APPLY_FAILED]
    assert "_do_madrpc failed" in ledger.history()[-1].detail

    done = asyncio.run(apply_plan(plan, _actuator(fabric), ledger, apply=True, force=False, actor="t",
                                  ticket=_ticket))
    assert done.ok and [o.state for o in done.outcomes] == [DISABLED, DISABLED], done.outcomes[0].detail
    assert len(_links(fabric).links) == before - 2  # both links gone from the next ibnetdiscover
    host_link = next(e for e in ledger.current().values() if any(not x.is_switch for x in e.ends))
    assert (next(x for x in host_link.ends if not x.is_switch).done or "").startswith("left enabled")
    assert host_link.ticket.startswith("ticket ") and host_link.actor == "t"

    again = asyncio.run(apply_plan(plan, _actuator(fabric), ledger, apply=True, force=False, actor="t",
                                   ticket=_ticket))
    assert [o.state for o in again.outcomes] == ["already_disabled", "already_disabled"]

    refused = asyncio.run(reenable(host_link, _actuator(fabric), ledger, _actuator(fabric).counters, actor="t",
                                   window_s=0.2, train_s=0.5))
    assert not refused.ok and "did not train" in refused.findings[0]
    assert ledger.find(host_link.link).state == REENABLE_REFUSED
    assert len(_links(fabric).links) == before - 2

    spine_link = next(e for e in ledger.current().values() if all(x.is_switch for x in e.ends))
    ok = asyncio.run(reenable(spine_link, RepairedCable(fabric), ledger, _counters_after_sweep(fabric), actor="t",
                              window_s=0.2, train_s=8.0))
    assert ok.ok, ok.findings
    assert ledger.find(spine_link.link).state == REENABLED
    assert len(_links(fabric).links) == before - 1


class RepairedCable(IbPortState):
    """The technician's replaced cable: ibsim retrains a port disabled through its SMA only when it is
    cabled again (its peer keeps a half-link), so once both ends are enabled the new cable goes in through
    ibsim's console."""

    def __init__(self, f: IbFabric) -> None:
        super().__init__(f.discover, sim_diags(f.socket))
        self.fabric = f
        self.enabled: list[End] = []

    async def set_enabled(self, end: End, enabled: bool) -> None:
        await super().set_enabled(end, enabled)
        self.enabled.append(end)
        if enabled and len(self.enabled) == 2:
            a, b = (f'"S-{e.guid}"[{e.port}]' for e in self.enabled)
            for command in (f"Unlink {a}", f"Unlink {b}", f"Link {a} {b}"):  # ibsim keeps a half-link
                self.fabric.console(command)


def _counters_after_sweep(f: IbFabric) -> Callable[[End], Awaitable[Mapping[str, int]]]:
    """perfquery is LID-routed: the subnet manager sweeps the repaired link first (as a running SM does)."""
    async def read(end: End) -> Mapping[str, int]:
        route(f)
        return await _actuator(f).counters(end)
    return read
