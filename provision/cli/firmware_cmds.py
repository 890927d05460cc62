"""`provision firmware inventory|plan|apply` and `provision bios plan|apply` (provision/firmware/, provision/bios/).
Thin: options, one library call, one renderer."""

from __future__ import annotations

from typing import Any

import typer

from provision.bmc import RunOptions
from provision.cli.app import app, common_options
from provision.cli.bmc_cmds import BmcOptions
from provision.cli.option_groups import with_group
from provision.cli.step_view import counts, fail_if_any, render_failures, result_json, with_progress
from provision.command.context import Context
from provision.command.exits import ERROR
from provision.command.options import Common, HostsOpt
from provision.command.output import console, emit_json, esc
from provision.firmware.plan import Operation, RolloutPlan
from provision.site.select import select_hosts
from provision.steps.pipeline import BIOS_APPLY, FIRMWARE_APPLY, FIRMWARE_INVENTORY

firmware_app = typer.Typer(help="Firmware on the host classes' baselines: inventory, plan, apply.",
                           no_args_is_help=True)
bios_app = typer.Typer(help="BIOS attributes on the host classes' baselines: plan, apply.", no_args_is_help=True)
app.add_typer(firmware_app, name="firmware")
app.add_typer(bios_app, name="bios")


@firmware_app.command("inventory")
@with_group("bmc", BmcOptions)
@common_options
def inventory(hosts: HostsOpt = None, *, bmc: BmcOptions, common: Common) -> None:
    """Read every BMC's FirmwareInventory and BIOS attributes; a host off its baseline fails firmware_drift or
    bios_drift, a drifted host found back on it re-enters the flow."""
    from provision.firmware.step import InventoryStep

    ctx = Context.of(common)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    step = InventoryStep(ctx.site, ctx.store, bmc.run_options(FIRMWARE_INVENTORY))
    results = with_progress(lambda progress: step.run(selected, progress), len(selected), "reading firmware",
                            common.json_out)
    if common.json_out:
        emit_json({"site": ctx.site.name, "counts": counts(results), "hosts": [result_json(r) for r in results],
                   "reconciled": list(step.closed_intents)})
    else:
        render_failures(results)  # with what was found of a killed apply's changes
        tally = counts(results)
        console.print(f"inventoried {tally['done']}, failed {tally['failed']}, not taken {tally['already']}")
    fail_if_any(results)


def _plan(common: Common, hosts: str | None, operation: Operation) -> tuple[Context, RolloutPlan]:
    from provision.firmware.rollout import current_plan

    ctx = Context.of(common)
    return ctx, current_plan(ctx.site, ctx.store, operation, select_hosts(ctx.site, hosts, everyone=True))


def _render_plan(plan: RolloutPlan) -> None:
    from rich.table import Table

    table = Table(title=f"{plan.operation} plan", title_justify="left")
    for col in ("wave", "host", "rack", "change"):
        table.add_column(col)
    for i, wave in enumerate(plan.waves):
        for name in wave:
            h = plan.host(name)
            change = [f"{u.pin}: {', '.join(str(s) for s in u.seen)} -> {u.wanted}" for u in h.updates]
            change += [f"{k} = {v}" for k, v in h.settings.items()]
            table.add_row("canary" if i == 0 and plan.canary else str(i), esc(name),
                          esc(h.rack), esc("\n".join(change)))
    console.print(table)
    for b in plan.blocked:
        console.print(f"[yellow]{esc(b.host)}[/]: {esc(b.blocked or '')}")
    for label in plan.unmatched:
        console.print(f"[red]baseline pin {esc(label)} matches no component any inventoried host reports[/]: "
                      "fix its kind or id in the site file")
    console.print(f"{len(plan.hosts)} hosts to change in {len(plan.waves)} waves, {plan.on_baseline} on baseline, "
                  f"{len(plan.blocked)} blocked")


def _apply(common: Common, hosts: str | None, operation: Operation, options: RunOptions) -> None:
    from provision.bios.step import apply_bios
    from provision.firmware.rollout import apply_firmware

    ctx = Context.of(common)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    apply = apply_firmware if operation == "firmware" else apply_bios
    result = with_progress(lambda progress: apply(ctx.site, ctx.store, selected, options, progress),
                           len(selected), f"applying {operation}", common.json_out)
    payload: dict[str, Any] = {**result.as_json(), "counts": counts(result.results),
                               "hosts": [result_json(r) for r in result.results]}
    if common.json_out:
        emit_json(payload)
    else:
        render_failures(result.results)
        tally = counts(result.results)
        console.print(f"{operation}: done {tally['done']}, failed {tally['failed']} in {result.waves_run} of "
                      f"{len(result.plan.waves)} waves; at most {result.peak_rebooting} rebooting at once")
        if result.stopped:
            console.print(f"[red]stopped:[/] {esc(result.stopped)}")
        for line in result.reconciled_lines:
            console.print(f"[yellow]reconciled[/] {esc(line)}")
    fail_if_any(result.results)
    if result.stopped:  # the rollout could not go on (its failed hosts, if any, made it exit 2 above)
        raise typer.Exit(ERROR)


@firmware_app.command("plan")
@common_options
def firmware_plan(hosts: HostsOpt = None, *, common: Common) -> None:
    """What `firmware apply` would update, host by host, in which waves (from the last inventory)."""
    _, plan = _plan(common, hosts, "firmware")
    emit_json(plan.as_json()) if common.json_out else _render_plan(plan)


@firmware_app.command("apply")
@with_group("bmc", BmcOptions)
@common_options
def firmware_apply(hosts: HostsOpt = None, *, bmc: BmcOptions, common: Common) -> None:
    """SimpleUpdate every drifted component from the controller's image server: canary, then batches."""
    _apply(common, hosts, "firmware", bmc.run_options(FIRMWARE_APPLY))


@bios_app.command("plan")
@common_options
def bios_plan(hosts: HostsOpt = None, *, common: Common) -> None:
    """What `bios apply` would set, host by host, in which waves (from the last inventory)."""
    _, plan = _plan(common, hosts, "bios")
    emit_json(plan.as_json()) if common.json_out else _render_plan(plan)


@bios_app.command("apply")
@with_group("bmc", BmcOptions)
@common_options
def bios_apply(hosts: HostsOpt = None, *, bmc: BmcOptions, common: Common) -> None:
    """PATCH the baseline's BIOS attributes to Bios/Settings, reboot within the site's limits, read back."""
    _apply(common, hosts, "bios", bmc.run_options(BIOS_APPLY))
