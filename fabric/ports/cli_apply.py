"""`fabric ports apply --site S [--apply] [--force]` and `fabric ports reenable LINK --repaired --site S`.

`apply` plans from the site's fabric now (live discovery, the site's UFM or `--events` files, live counter
sweeps with `--sweep`), prints the plan and what it did: a dry run unless `--apply`; a plan over the site's
caps applies nothing without `--force`. Through UFM each port change is a job followed to its end within
`--job-timeout` (default: the site's `fabric.ufm.job_timeout_s`); a job that fails or outlives it is in the
output and the ledger. Both first reconcile the links a run cut short left in flight (`planned` or
`reenabling` as their latest row: their ports are read and what happened is recorded, reconcile.py); a dry run
lists them. After an apply or a re-enable the hosts follow their ports (the `ports` lifecycle step,
fabric/ports/step.py). Exit codes are every command's (provision/command/exits.py): an error is one readable line on
stderr and exit 1, as are a refused plan and an apply that stopped; a re-enable that found the link still bad
exits 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fabric.options import DbOpt, JsonOpt, SiteOpt, site_path
from fabric.ports.apply import ApplyReport
from fabric.ports.inputs import burnin_evidence, parse_duration, parse_now, read_events, zone
from fabric.ports.ledger import DISABLED
from fabric.ports.metrics import write_port_metrics
from fabric.ports.reconcile import Reconciled
from fabric.ports.render import plan_text, plan_to_dict
from fabric.ports.site_run import ApplyInputs, PortsSite, open_ports_site, plan_and_apply, reenable_link
from fabric.ports.step import hosts_follow
from fabric.ports.ticket import entry_ticket
from provision.command.exits import ERROR, problems_unless
from provision.errors import BringupError
from provision.slurm.after_step import sync_after_step
from provision.state.secret_values import mask
from provision.steps.runner import HostResult

JobTimeoutOption = Annotated[str | None, typer.Option(
    "--job-timeout", help="How long a UFM job (a port's disable or enable) may run before the ledger says "
    "job_timeout (default: the site's fabric.ufm.job_timeout_s, 120s unless set).")]


def _out(text: str) -> None:
    sys.stdout.write(mask(text))


def report_text(report: ApplyReport) -> str:
    if report.refused:
        return ("REFUSED, nothing applied (the plan is over the site's caps; --force applies it anyway): "
                + "; ".join(report.refused) + "\n")
    head = f"applied via {report.via}" if report.applied else f"dry run (via {report.via}): nothing sent"
    lines = [head]
    lines += [f"  {o.state:<16} {o.link}: {o.detail}" for o in report.outcomes]
    if report.stopped:
        lines.append(f"STOPPED: {report.stopped} (the ledger says what was done; run again to finish)")
    return "\n".join(lines) + "\n"


def reconciled_text(done: tuple[Reconciled, ...]) -> str:
    """The links a cut-short run left in flight, and what was recorded for each."""
    if not done:
        return ""
    lines = [f"  {r.was} -> {r.state:<12} {r.link}: {r.detail}" for r in done]
    return "in flight from an interrupted run:\n" + "\n".join(lines) + "\n"


def hosts_text(results: list[HostResult]) -> str:
    lines = []
    for r in results:
        to = r.state.value if r.state else "?"
        lines.append(f"  host {r.host}: {to}" + (f" ({r.reason}: {r.detail})" if r.reason else ""))
    return ("hosts:\n" + "\n".join(lines) + "\n") if lines else "hosts: none moved\n"


def _follow(ps: PortsSite) -> list[HostResult]:
    moved = asyncio.run(hosts_follow(ps.site, ps.store, list(ps.ledger.current().values())))
    line = sync_after_step(ps.site, ps.store)
    if line is not None:
        sys.stderr.write(line + "\n")
    return moved


def apply_command(
    site: SiteOpt = None,
    apply: Annotated[bool, typer.Option("--apply", help="Disable the links (default: a dry run).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Apply a plan over the site's caps.")] = False,
    events: Annotated[list[Path] | None, typer.Option(
        "--events", help="UFM event.log or REST JSON files, instead of the site's UFM (repeatable).")] = None,
    sweep: Annotated[str | None, typer.Option("--sweep", help="Two live counter sweeps this far apart (30s).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Window, e.g. 24h (default: the policy's).")] = None,
    now: Annotated[str | None, typer.Option("--now", help="ISO time the window ends (default: now).")] = None,
    tickets: Annotated[bool, typer.Option("--tickets", help="Print the ticket of every link disabled.")] = False,
    burnin: Annotated[list[Path] | None, typer.Option(
        "--burnin", help="`fabric burnin judge --json` output: its failing links as evidence (repeatable).")] = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
    job_timeout: JobTimeoutOption = None,
) -> None:
    """Disable (both ends of) every link the plan condemns, each step in the port ledger; dry run unless --apply."""
    ps = open_ports_site(site_path(site), db)
    try:
        policy = ps.site.spec.fabric.port_policy if ps.site.spec.fabric else None
        tz = zone(policy.ufm_timezone if policy else "UTC")
        inputs = ApplyInputs(parse_duration(since) if since else None, parse_now(now) if now else None,
                             tuple(read_events(events, tz)) if events else None,
                             parse_duration(sweep).total_seconds() if sweep else None, apply, force,
                             tuple(burnin_evidence(burnin or [])),
                             parse_duration(job_timeout).total_seconds() if job_timeout else None)
        run = asyncio.run(plan_and_apply(ps, inputs))
        write_port_metrics(run.plan, ps.store.path)
        moved = [*run.held, *_follow(ps)] if run.report.applied else list(run.held)
        links = [r.link for r in run.reconciled if r.state == DISABLED] + [o.link for o in run.report.outcomes]
        disabled = [ps.ledger.find(x) for x in links] if tickets and run.report.applied else []
    finally:
        ps.close()
    if json_out:
        out: dict[str, Any] = {"reconciled": [r.to_dict() for r in run.reconciled], "plan": plan_to_dict(run.plan),
                               "report": run.report.to_dict(), "hosts": [_host_dict(r) for r in moved]}
        _out(json.dumps(out, indent=2) + "\n")
    else:
        _out(reconciled_text(run.reconciled) + plan_text(run.plan) + report_text(run.report)
             + (hosts_text(moved) if run.report.applied or moved else "")
             + "".join(f"\n--- ticket {e.link} (ledger row {e.id})\n{entry_ticket(e)}" for e in disabled))
    if not run.report.ok:  # refused (over the caps) or stopped: the report above says which
        raise typer.Exit(ERROR)


def _host_dict(r: HostResult) -> dict[str, Any]:
    return {"host": r.host, "ok": r.ok, "state": r.state.value if r.state else None, "reason": r.reason,
            "detail": r.detail}


def reenable_command(
    link: Annotated[str, typer.Argument(help="Ledger link id, or one end as NAME[PORT] / 0xGUID[PORT].")],
    site: SiteOpt = None,
    repaired: Annotated[bool, typer.Option("--repaired", help="The cable or transceiver was replaced.")] = False,
    window: Annotated[str, typer.Option("--window", help="Error-counter window after it trains.")] = "30s",
    train: Annotated[str, typer.Option("--train", help="How long the link may take to train.")] = "15s",
    db: DbOpt = None,
    job_timeout: JobTimeoutOption = None,
) -> None:
    """Re-enable both ends of a repaired link if it trains at its design rate with no errors; else it stays out."""
    if not repaired:
        raise BringupError("say --repaired once the cable or transceiver was replaced (a link is re-enabled "
                           "only after a repair)")
    window_s, train_s = parse_duration(window).total_seconds(), parse_duration(train).total_seconds()
    job_timeout_s = parse_duration(job_timeout).total_seconds() if job_timeout else None
    ps = open_ports_site(site_path(site), db)
    try:
        run = asyncio.run(reenable_link(ps, link, window_s, train_s, job_timeout_s))
        moved = [*run.held, *_follow(ps)]
    finally:
        ps.close()
    result, entry = run.result, run.result.entry
    verdict = "re-enabled" if result.ok else "still out of service (disabled again)"
    lines = [f"{entry.link}: {verdict} (ledger row {entry.id})", *(f"  {f}" for f in result.findings)]
    _out(reconciled_text(run.reconciled) + "\n".join(lines) + "\n" + hosts_text(moved))
    problems_unless(result.ok)
