"""`fabric ports apply|reenable` on a site: the plan from the fabric as it is now, the actuator the site
calls for, the port ledger in the site's state store, and the hosts behind the links.

The plan reads live discovery (`fabric.live`: ibnetdiscover from each attachment point the site's tools
reach the fabric from, `fabric.diags`), UFM's events, ports and links from the site's UFM (`fabric.ufm`; or
`--events` files, which replace them), and, when asked, two live counter sweeps (`fabric.counter_sweep`:
`perfquery` of every switch port, `sweep_s` apart; a switch that cannot be read is an unknown, not an abort).
Ports change through UFM when the site has `fabric.ufm` (each change a UFM job followed to its end within
`--job-timeout`, else the site's `fabric.ufm.job_timeout_s`, up to `UFM_PARALLEL` links at once), else
in-band (`ibportstate`, one link at a time).

The store is opened as every command opens it (`provision.site.store.open_store`: this site's database
only, no directory made for a mistyped `--db`). An acting run (`apply --apply`, `reenable`) holds the site's
ports lock, first reconciles the links a cut-short run left in flight (reconcile.py) and has the hosts
behind them follow, then moves the hosts behind each link out of golden before its `planned` row is written
and any port is touched.
The UFM credential is resolved here (environment or vault, `provision.site.credentials`) and handed to
the client only: it is never in argv, a log line, the ledger or the output.
"""

from __future__ import annotations

import asyncio
import fcntl
import getpass
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from fabric import live
from fabric.counter_sweep import sweep_switches
from fabric.design import Design, Port, load_design
from fabric.diags import Attachment, Diags
from fabric.errors import FabricError
from fabric.pipeline import topology_from_texts, with_site_locations
from fabric.ports.actuate import Actuator, IbPortState, lids_from_ibnetdiscover
from fabric.ports.apply import ApplyReport, apply_plan, ledger_ends
from fabric.ports.counters import CounterSweep
from fabric.ports.evidence import Evidence, host_restarts
from fabric.ports.ledger import APPLY_FAILED, DISABLED, JOB_TIMEOUT, REENABLE_REFUSED, Ledger, LedgerEntry
from fabric.ports.plan import PlannedLink, PortPlan, UnderRepair, plan_ports
from fabric.ports.reconcile import Reconciled, in_flight, reconcile
from fabric.ports.reenable import ReenableResult, reenable
from fabric.ports.resolve import LinkEnd
from fabric.ports.step import hosts_follow
from fabric.ports.ticket import ticket_text
from fabric.topology import End, NodeType, Topology
from fabric.ufm.client import UfmActuator, UfmClient
from fabric.ufm.events import Rejected, UfmEvent, parse_rest_events
from fabric.ufm.resources import UfmPort, parse_link_cables, parse_ufm_ports
from provision.site import load_site
from provision.site.credentials import login
from provision.site.model import Site
from provision.site.port_policy import PortPolicy
from provision.site.store import open_store
from provision.state import StateStore
from provision.state.identifiers import canonical_guid
from provision.steps.runner import HostResult

DISCOVERY_TIMEOUT_S = 120.0
UFM_PARALLEL = 8  # links whose UFM jobs are in flight at once


@dataclass
class PortsSite:
    """A site opened for `fabric ports`: its model, state store, ledger, design and fabric tools."""

    site: Site
    store: StateStore
    design: Design | None
    diags: Diags = field(default_factory=Diags)

    @property
    def attach(self) -> Attachment | None:
        """Where in-band tools run from: where the first discovery did (in-band routes start at its node)."""
        return self.diags.attachments[0] if self.diags.attachments else None

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.store)

    def close(self) -> None:
        self.store.close()


def open_ports_site(site_file: Path, db: Path | None) -> PortsSite:
    site = load_site(site_file)
    design_path = site.fabric_design
    design = with_site_locations(load_design(design_path), site) if design_path is not None else None
    return PortsSite(site, open_store(site, db), design, Diags.for_site(site_file, site=site))


@contextmanager
def ports_lock(ps: PortsSite) -> Iterator[None]:
    """One acting `fabric ports` run per state store at a time: the intents a run reconciles are no live run's.
    The kernel drops the lock of a killed run."""
    path = ps.store.path.with_name(ps.store.path.name + ".ports.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FabricError(f"another `fabric ports` run is changing this site's ports ({path} is locked): "
                              "wait for it to finish") from None
        yield
    finally:
        os.close(fd)


def actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def discover_texts(ps: PortsSite) -> list[tuple[str, str]]:
    return list(live.discover(DISCOVERY_TIMEOUT_S, ps.diags).captures)


def ufm_client(ps: PortsSite, job_timeout_s: float | None = None) -> UfmClient | None:
    """The site's UFM client (credential resolved now, from the environment or the vault); None without UFM."""
    fabric = ps.site.spec.fabric
    ufm = fabric.ufm if fabric is not None else None
    if ufm is None:
        return None
    ca = ps.site.directory / ufm.ca_bundle if ufm.ca_bundle else None
    return UfmClient(str(ufm.url), login(ps.site, ufm.credential), verify=ufm.verify_tls, ca_bundle=ca,
                     timeout_s=ufm.timeout_s, job_timeout_s=job_timeout_s or ufm.job_timeout_s, auth=ufm.auth)


@dataclass(frozen=True)
class UfmView:
    events: tuple[UfmEvent | Rejected, ...] = ()
    ports: Mapping[End, UfmPort] = field(default_factory=dict)


async def read_ufm(client: UfmClient, tz: str) -> UfmView:
    """UFM's events, ports (states, labels) and links (cable serials)."""
    events, ports, links = await client.events(), await client.ports(), await client.links()
    log = parse_rest_events(events, "ufm:/ufmRest/app/events", ZoneInfo(tz))
    out: dict[End, UfmPort] = dict(parse_link_cables(links, "ufm:/ufmRest/resources/links").ports)
    out.update(parse_ufm_ports(ports, "ufm:/ufmRest/resources/ports").ports)
    return UfmView((*log.rejected, *log.events), out)


def switch_lids(texts: Sequence[tuple[str, str]], top: Topology) -> dict[str, int]:
    lids: dict[str, int] = {}
    for _label, text in texts:
        lids.update(lids_from_ibnetdiscover(text))
    return {g: lid for g, lid in lids.items() if g in top.nodes and top.nodes[g].type is NodeType.SWITCH}


async def live_sweep(ps: PortsSite, lids: Mapping[str, int], timeout_s: float = 30.0) -> CounterSweep:
    """Every switch port's error counters now (`perfquery -l <lid> 255`); a switch that cannot be read is a
    rejected input of the sweep and its ports have no rate."""
    async def run(argv: Sequence[str], timeout: float) -> str:
        return await ps.diags.text(argv, timeout, ps.attach)
    return (await sweep_switches(run, sorted(lids.items()), timeout_s)).as_sweep()


async def live_sweeps(ps: PortsSite, lids: Mapping[str, int], sweep_s: float) -> list[CounterSweep]:
    first = await live_sweep(ps, lids)
    await asyncio.sleep(sweep_s)
    return [first, await live_sweep(ps, lids)]


def ticket_for(design: Design | None) -> Any:
    """`apply_plan`'s ticket callback: the ticket text, and the design's cable id and rate for the ledger."""
    def ticket(pl: PlannedLink) -> tuple[str, Mapping[str, Any]]:
        dl = None
        if design is not None and pl.b is not None:
            dl = design.by_port.get(Port(pl.a.name, pl.a.port)) or design.by_port.get(Port(pl.b.name, pl.b.port))
        extra = {"design_cable": dl.cable if dl else None, "expected": dl.rate() if dl else None}
        evidence = [e.to_dict() for e in pl.evidence]
        text = ticket_text(ledger_ends(pl), pl.reason, evidence, pl.cable_serial, extra["design_cable"],
                           extra["expected"])
        return text, extra
    return ticket


@dataclass(frozen=True)
class ApplyInputs:
    since: timedelta | None = None
    now: datetime | None = None
    events: tuple[UfmEvent | Rejected, ...] | None = None  # files given: they replace UFM's events
    sweep_s: float | None = None  # two live counter sweeps this far apart
    apply: bool = False
    force: bool = False
    evidence: tuple[Evidence, ...] = ()  # other tools' findings (the burn-in judge's failing links)
    job_timeout_s: float | None = None  # how long a UFM job may run (default: the site's fabric.ufm.job_timeout_s)


@dataclass(frozen=True)
class ApplyRun:
    plan: PortPlan
    report: ApplyReport
    reconciled: tuple[Reconciled, ...] = ()  # links a cut-short run left in flight (a dry run only lists them)
    held: tuple[HostResult, ...] = ()  # hosts moved before their links were touched


class HostsFollow:
    """Runs the `ports` step over the ledger now (one run at a time), keeping every host it moved; given a row
    about to be written (a `planned` link), as if it were its link's latest."""

    def __init__(self, ps: PortsSite) -> None:
        self.ps = ps
        self.moved: list[HostResult] = []
        self.lock = asyncio.Lock()

    async def __call__(self, row: LedgerEntry | None = None) -> None:
        async with self.lock:
            current = self.ps.ledger.current()
            if row is not None:
                current[row.link] = row
            self.moved += await hosts_follow(self.ps.site, self.ps.store, list(current.values()))


async def reconcile_in_flight(ps: PortsSite, actuator: Actuator, follow: Callable[[], Awaitable[None]]
                              ) -> tuple[Reconciled, ...]:
    """Reconcile what a cut-short run left in flight; the hosts follow at once (before this run acts)."""
    done = await reconcile(ps.ledger, actuator, actor=actor())
    if any(r.row is not None for r in done):
        await follow()
    return done


def listed_in_flight(ledger: Ledger) -> tuple[Reconciled, ...]:
    """A dry run reads no port: the links in flight, as they are."""
    return tuple(Reconciled(e.link, e.state, e.state, f"in flight (row {e.id} by {e.actor}, {e.command}): an "
                            "acting run (--apply) reads its ports and records what happened first", None)
                 for e in in_flight(ledger))


def under_repair(ledger: Ledger) -> dict[End, UnderRepair]:
    """Each end of a link the port ledger has disabled (and not re-enabled) -> that link's ends and why. A
    link only planned, or whose apply failed, is not under repair: the next apply tries it again."""
    return _ledger_links(ledger, (DISABLED, REENABLE_REFUSED))


def _ledger_links(ledger: Ledger, states: tuple[str, ...]) -> dict[End, UnderRepair]:
    out: dict[End, UnderRepair] = {}
    for entry in ledger.current().values():
        if entry.state not in states:
            continue
        ends = tuple(LinkEnd(canonical_guid(e.guid) or e.guid, e.name, e.port, e.is_switch, None, e.label)
                     for e in entry.ends)
        why = f"port ledger row {entry.id}: {entry.state} ({entry.why})"
        for end in ends:
            out[End(end.guid, end.port)] = (ends, why)
    return out


def unfinished(ledger: Ledger) -> dict[End, UnderRepair]:
    """Each end of a link whose latest apply stopped part way (`apply_failed`, `job_timeout`) -> that link's
    ends and its ledger row: the next apply finishes it, even where one of its ports is already disabled."""
    return _ledger_links(ledger, (APPLY_FAILED, JOB_TIMEOUT))


async def plan_and_apply(ps: PortsSite, inputs: ApplyInputs) -> ApplyRun:
    """Plan from the site's fabric now, then dry-run or apply it (the caps hold without `force`); an apply
    first reconciles the links a cut-short run left in flight."""
    policy = ps.site.spec.fabric.port_policy if ps.site.spec.fabric is not None else None
    if policy is None:
        raise FabricError(f"{ps.site.path}: the site has no `fabric:` section")
    with ports_lock(ps) if inputs.apply else nullcontext():
        return await _plan_and_apply(ps, inputs, policy)


async def _plan_and_apply(ps: PortsSite, inputs: ApplyInputs, policy: PortPolicy) -> ApplyRun:
    texts = await asyncio.to_thread(discover_texts, ps)
    follow = HostsFollow(ps)
    async with AsyncExitStack() as stack:
        client = ufm_client(ps, inputs.job_timeout_s)
        if client is not None:
            await stack.enter_async_context(client)
        actuator = actuator_for(ps, client, texts)
        if inputs.apply:
            reconciled = await reconcile_in_flight(ps, actuator, follow)
            if any(r.row is not None for r in reconciled):  # a link found disabled is no longer discovered
                texts = await asyncio.to_thread(discover_texts, ps)
        else:
            reconciled = listed_in_flight(ps.ledger)
        top = topology_from_texts(texts)
        view = await read_ufm(client, policy.ufm_timezone) if client is not None else UfmView()
        events = inputs.events if inputs.events is not None else view.events
        sweeps = await live_sweeps(ps, switch_lids(texts, top), inputs.sweep_s) if inputs.sweep_s else []
        now = inputs.now or datetime.now(UTC)
        plan = plan_ports(top, events, sweeps, (), policy, now, ps.design,
                          since=inputs.since, ufm_ports=view.ports, evidence=inputs.evidence,
                          under_repair=under_repair(ps.ledger), unfinished=unfinished(ps.ledger),
                          restarts=host_restarts(ps.store, now - (inputs.since or policy.window)))
        report = await apply_plan(plan, actuator, ps.ledger, apply=inputs.apply, force=inputs.force,
                                  actor=actor(), ticket=ticket_for(ps.design),
                                  parallel=UFM_PARALLEL if client is not None else 1, hold=follow)
    return ApplyRun(plan, report, reconciled, tuple(follow.moved))


def actuator_for(ps: PortsSite, client: UfmClient | None, texts: Sequence[tuple[str, str]]) -> Actuator:
    """UFM when the site has it; else in-band from the first attachment point's view of the fabric."""
    if client is not None:
        return UfmActuator(client)
    pending = [texts[0][1]]  # the capture just taken serves the first look; later looks rediscover

    def discover() -> str:
        return pending.pop() if pending else discover_texts(ps)[0][1]
    return IbPortState(discover, ps.diags, ps.attach)


@dataclass(frozen=True)
class ReenableRun:
    result: ReenableResult
    reconciled: tuple[Reconciled, ...] = ()
    held: tuple[HostResult, ...] = ()  # hosts moved after the reconcile, before this re-enable


async def reenable_link(ps: PortsSite, spec: str, window_s: float, train_s: float,
                        job_timeout_s: float | None = None) -> ReenableRun:
    """Re-enable the ledger's link `spec` after the repair, if it trains clean; else it stays disabled. What a
    cut-short run left in flight is reconciled first (a killed re-enable of this very link included)."""
    ps.ledger.find(spec)  # a link the ledger does not know is an error before anything is read
    with ports_lock(ps):
        texts = await asyncio.to_thread(discover_texts, ps)
        async with AsyncExitStack() as stack:
            client = ufm_client(ps, job_timeout_s)
            if client is not None:
                await stack.enter_async_context(client)
            actuator = actuator_for(ps, client, texts)
            follow = HostsFollow(ps)
            reconciled = await reconcile_in_flight(ps, actuator, follow)
            entry: LedgerEntry = ps.ledger.find(spec)
            inband = actuator if isinstance(actuator, IbPortState) else IbPortState(
                lambda: discover_texts(ps)[0][1], ps.diags, ps.attach)
            result = await reenable(entry, actuator, ps.ledger, _fresh_counters(ps, inband), actor=actor(),
                                    window_s=window_s, train_s=train_s)
    return ReenableRun(result, reconciled, tuple(follow.moved))


def _fresh_counters(ps: PortsSite, inband: IbPortState) -> Any:
    """perfquery is LID-routed: after a re-enable the SM has swept the link; rediscover for its LIDs first."""
    async def read(end: End) -> Mapping[str, int]:
        await asyncio.to_thread(inband.refresh)
        return await inband.counters(end)
    return read
