"""`provision slurm sync`: Slurm's node states in step with the lifecycle (provision/slurm/)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.table import Table

from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.exits import ERROR, PROBLEMS
from provision.command.options import Common
from provision.command.output import console, emit_json, err_console, esc
from provision.errors import BringupError
from provision.slurm.plan import Action
from provision.slurm.sync import SyncResult

slurm_app = typer.Typer(help="Slurm: drain hosts that leave golden, resume the ones that earn it again.",
                        no_args_is_help=True)
app.add_typer(slurm_app, name="slurm")


def _payload(result: SyncResult) -> dict[str, Any]:
    return {
        "dry_run": result.dry_run,
        "decisions": [{"host": d.host, "lifecycle": d.lifecycle, "node_state": d.node_state,
                       "node_reason": d.node_reason, "action": d.action.value, "reason": d.reason, "note": d.note}
                      for d in result.plan.decisions],
        "standings": {h: s.value for h, s in result.standings.items()},
        "recorded": list(result.recorded),
        "failed_recorded": list(result.failed_recorded),
        "missing_golden": result.plan.missing_golden(),
        "unmanaged_nodes": list(result.plan.unmanaged),
        "scontrol_calls": result.calls,
        "reconciled": list(result.reconciled),
        "error": result.error,
        "wall_s": round(result.wall_s, 3),
    }


def _render(result: SyncResult) -> None:
    shown = [d for d in result.plan.decisions if d.action is not Action.none or d.note]
    if shown:
        table = Table(title="would change" if result.dry_run else None)
        for column in ("host", "bringup", "slurm before", "action", "why"):
            table.add_column(column)
        for d in shown:
            table.add_row(esc(d.host), d.lifecycle, esc(d.node_state or "unknown to Slurm"),
                          d.action.value if d.action is not Action.none else "-",
                          esc(d.reason or d.note) if d.action is not Action.none else esc(d.note))
        console.print(table)
    acting = len(result.plan.acting())
    verb = "would change" if result.dry_run else "changed"
    console.print(f"slurm sync: {len(result.plan.decisions)} hosts, {verb} {acting}, "
                  f"{len(result.recorded)} recorded in history, {result.calls} scontrol calls, {result.wall_s:.2f} s")
    if result.reconciled:
        console.print(f"a sync died after asking Slurm to change {esc(', '.join(result.reconciled))}: "
                      "recorded from what Slurm says now")
    if result.plan.unmanaged:
        console.print(f"{len(result.plan.unmanaged)} Slurm nodes are no host of this site (left alone)")


@slurm_app.command("sync")
@common_options
def sync_cmd(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; change nothing.")] = False,
    *,
    common: Common,
) -> None:
    """Drain the hosts that are not golden (reason `bringup: <why> (<when>)`), resume the golden ones bringup
    had drained (never one an admin drained), record Slurm's health-check drains as failures."""
    from provision.slurm.client import SlurmClient
    from provision.slurm.sync import sync

    ctx = Context.of(common)
    slurm = ctx.site.spec.slurm
    if slurm is None:
        raise BringupError(f"site {ctx.site.name} has no slurm section (slurm: cluster_name, controller, partitions)")
    result = asyncio.run(sync(ctx.site, ctx.store, SlurmClient(slurm), dry_run=dry_run))
    if common.json_out:
        emit_json(_payload(result))
    else:
        _render(result)
    missing = result.plan.missing_golden()
    if result.error:
        err_console.print(f"[red]error:[/] {esc(result.error)} (re-run `provision slurm sync` to finish)")
        raise typer.Exit(ERROR)
    if missing:
        err_console.print(f"[red]error:[/] golden hosts Slurm does not know: {esc(', '.join(missing))} "
                          "(run the slurm roles of site.yml, then restart slurmctld)")
        raise typer.Exit(PROBLEMS)
