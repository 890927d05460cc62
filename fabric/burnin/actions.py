"""What each `fabric burnin` command does with a site: one call per command, rendering left to the CLI."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabric.burnin.engine import RoutingEngine
from fabric.burnin.fabric_io import IbTools
from fabric.burnin.history import History, LinkRow
from fabric.burnin.judge import NOT_COVERED, SLOWED, Judgement, judge
from fabric.burnin.site_plan import ledger_out_of_service, plan_for_site, read_fabric, retry_for, site_hosts
from fabric.burnin.stage_run import RunOptions, RunReport, StageReport, run_plan, ssh_remote
from fabric.captures import read_capture
from fabric.errors import FabricError
from provision.errors import BringupError
from provision.site import load_site
from provision.site.model import Site
from provision.site.store import open_store
from provision.ssh import SshSettings
from provision.state import State, StateStore

_HCA_INDEX = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Opened:
    site: Site
    store: StateStore
    history: History


def _store(site: Site, db: Path | None) -> StateStore:
    """The site's state store as every command opens it (`provision.site.store.open_store`: refuses another
    site's database and a directory that does not exist); its refusal as a fabric error, one line."""
    try:
        return open_store(site, db)
    except FabricError:
        raise
    except BringupError as e:
        raise FabricError(str(e)) from None


def open_site(site_file: Path, db: Path | None) -> Opened:
    site = load_site(site_file)
    store = _store(site, db)
    return Opened(site, store, History(store))


READY = (State.healthy, State.burned_in, State.golden)


def plan_site(site_file: Path, routing: str, discovered: Path | None, hosts: str | None,
              only: set[str] | None = None, timeout_s: float = 120.0, *, db: Path | None = None,
              all_hosts: bool = False, engine: RoutingEngine | None = None) -> dict[str, Any]:
    """The site's GPU hosts (those healthy or further, unless `all_hosts`) on the fabric as it is now."""
    site = load_site(site_file)
    store = _store(site, db)
    try:
        if only is None and not all_hosts:
            only = {h for state in READY for h in store.in_state(state)}
        out_of_service = ledger_out_of_service(store)
    finally:
        store.close()
    names = site_hosts(site, hosts, only)
    if not names:
        raise FabricError("no GPU host of the site matches" + (f" --hosts {hosts!r}" if hosts else "")
                          + ("" if all_hosts else " and is healthy, burned_in or golden (--all-hosts: any state)"))
    fabric = read_fabric(site, discovered, routing, timeout_s)
    return plan_for_site(site, fabric, names, site.spec.policy.burnin_floor_pct, out_of_service, engine)


def gpu_pairing(site: Site) -> Callable[[str, str], int | None]:
    """The GPU an HCA is paired with for GPUDirect: the host class's `ib.gpu_for_hca` when it says, else HCA n
    of the class's hca_count maps to GPU n * gpus / hcas (mlx5_0..7 on 8 GPUs: one each; on 2 GPUs: mlx5_0-3
    -> 0, mlx5_4-7 -> 1)."""
    def gpu_of(host: str, hca: str) -> int | None:
        h = site.host(host)
        cls = site.host_class(h) if h is not None else None
        m = _HCA_INDEX.search(hca)
        if cls is None or cls.gpu is None or cls.ib is None or m is None or cls.ib.hca_count == 0:
            return None
        index = int(m.group(1))
        if cls.ib.gpu_for_hca is not None:
            pairs = cls.ib.gpu_for_hca
            return pairs[index] if index < len(pairs) and pairs[index] < cls.gpu.count else None
        return min(cls.gpu.count - 1, int(m.group(1)) * cls.gpu.count // cls.ib.hca_count)
    return gpu_of


def load_plan(path: Path) -> dict[str, Any]:
    try:
        plan = json.loads(read_capture(path, "burn-in plan"))
    except ValueError as exc:
        raise FabricError(f"{path}: not a burn-in plan ({exc})") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("stages"), list):
        raise FabricError(f"{path}: not a burn-in plan (no stages): write one with `fabric burnin plan --json`")
    return plan


def run_site(opened: Opened, plan: dict[str, Any], opts: RunOptions, *, kind: str = "run",
             night: str | None = None, progress: Callable[[StageReport], None] | None = None,
             retry: bool = True, routing: str = "live") -> RunReport:
    """Every stage of the plan, then (`retry`) one round of extra stages for the links only slowed flows
    reached, routed around the links that failed, in the same run."""
    settings = SshSettings.from_site(opened.site)
    settings.prepare()
    tools = IbTools.for_site(opened.site.path)

    def go(run: int | None, finish: bool) -> RunReport:
        return asyncio.run(run_plan(plan, opened.history, ssh_remote(settings), tools, gpu_pairing(opened.site),
                                    opts, kind=kind, night=night, progress=progress, run=run, finish=finish))

    report = go(None, not retry)
    if not retry:
        return report
    stored = opened.history.run_plan(report.run)
    if "retry_from" not in stored:
        j = judge(stored, opened.history.flows(report.run), opened.history.ports(report.run))
        targets = [v.link for v in j.links if v.verdict == NOT_COVERED and v.reason.startswith(SLOWED)]
        if targets:
            try:
                fabric = read_fabric(opened.site, None, routing, 120.0)
            except FabricError as exc:  # no fabric to route the retry on from here: the run ends as planned
                stored = {**stored, "retry_from": len(stored["stages"]) + 1, "retry_skipped": str(exc)}
            else:
                extra, _missing = retry_for(opened.site, fabric, stored, targets, [v.link for v in j.failing()])
                stored = {**stored, "stages": stored["stages"] + extra, "retry_from": len(stored["stages"]) + 1}
            opened.history.extend_plan(report.run, stored)
    again = go(report.run, True)
    return RunReport(report.run, report.resumed_from, report.stages + again.stages, report.skipped)


def judge_run(opened: Opened, run: int | None) -> tuple[int, Judgement]:
    run_id = run if run is not None else opened.history.latest_run()
    if run_id is None:
        raise FabricError("no burn-in run in the state store: `fabric burnin run --plan P --site S` first")
    plan = opened.history.run_plan(run_id)
    j = judge(plan, opened.history.flows(run_id), opened.history.ports(run_id))
    return run_id, j


def link_rows(run: int, night: str | None, j: Judgement, at: float) -> list[LinkRow]:
    return [LinkRow(run, night, v.link, v.name, v.verdict, v.best_gbps, v.errors, v.reason, at) for v in j.links]
