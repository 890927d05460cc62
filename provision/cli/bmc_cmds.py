"""BMC commands: harvest-macs, pxe-boot, power. Thin: options, one library call, one renderer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.bmc import PowerAction, PowerPolicy, RunOptions, operations
from provision.cli.app import app, common_options
from provision.cli.option_groups import with_group
from provision.cli.step_view import counts, fail_if_any, render_failures, result_json, with_progress
from provision.command.context import Context, require_directories
from provision.command.options import Common, HostsOpt
from provision.command.output import console, emit_json, esc
from provision.redfish import ClientOptions
from provision.site.select import select_hosts
from provision.steps.pipeline import HARVEST, POWER, PXE
from provision.steps.runner import HostResult
from provision.steps.spec import StepSpec


@dataclass(frozen=True)
class BmcOptions:
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=4096, help="BMCs talked to at once.")] = 128
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds per Redfish request.")] = 10.0
    host_timeout: Annotated[float | None, typer.Option(
        "--host-timeout", min=1, help="Seconds for one host's whole step (default: the step's, `provision steps`).")
    ] = None
    retries: Annotated[int, typer.Option("--retries", min=0, max=10, help="Retries on 5xx/connection errors.")] = 2
    auth: Annotated[str, typer.Option("--auth", help="'session' (X-Auth-Token, deleted after) or 'basic'.")] = "session"

    def run_options(self, spec: StepSpec, **extra: Any) -> RunOptions:
        if self.auth not in ("session", "basic"):
            raise typer.BadParameter("--auth must be 'session' or 'basic'")
        client = ClientOptions(timeout_s=self.timeout, retries=self.retries,
                               auth="session" if self.auth == "session" else "basic")
        return RunOptions(concurrency=self.concurrency, host_timeout_s=self.host_timeout or spec.host_timeout_s,
                          client=client, **extra)


@dataclass(frozen=True)
class PowerWait:
    power_timeout: Annotated[float, typer.Option("--power-timeout", min=1,
                                                 help="Seconds to wait for PowerState.")] = 60.0
    poll: Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between PowerState reads.")] = 1.0




@app.command("harvest-macs")
@with_group("bmc", BmcOptions)
@common_options
def harvest_macs(
    hosts: HostsOpt = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="CSV export (default: <state dir>/<site>-macs.csv).")]
    = None,
    yaml_path: Annotated[Path | None, typer.Option("--yaml", help="YAML export for MAAS (default: beside the CSV).")]
    = None,
    dhcpd_path: Annotated[
        Path | None, typer.Option("--dhcpd", help="ISC dhcpd host reservations (default: beside the CSV).")
    ] = None,
    dnsmasq_path: Annotated[
        Path | None, typer.Option("--dnsmasq", help="dnsmasq dhcp-host lines (default: beside the CSV).")
    ] = None,
    *,
    bmc: BmcOptions,
    common: Common,
) -> None:
    """Ask every BMC for its NICs, pick the PXE NIC, record macs_harvested (or failed with a reason)."""
    given = {"csv": csv_path, "yaml": yaml_path, "dhcpd": dhcpd_path, "dnsmasq": dnsmasq_path}
    require_directories(given)
    ctx = Context.of(common)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    options = bmc.run_options(HARVEST)
    results, exports = with_progress(
        lambda progress: operations.harvest_macs(ctx.site, ctx.store, selected, options, given, progress),
        len(selected), "harvesting MACs", common.json_out)
    if common.json_out:
        emit_json({"site": ctx.site.name, "counts": counts(results), "hosts": [result_json(r) for r in results],
                   "exports": {name: str(path) for name, path in exports.items()}})
    else:
        _render_harvest(ctx.site.name, results, exports)
    fail_if_any(results)


def _render_harvest(site_name: str, results: list[HostResult], exports: dict[str, Path]) -> None:
    from rich.table import Table

    tally = counts(results)
    table = Table(title=f"MACs of {esc(site_name)}", title_justify="left")
    for col in ("host", "serial", "PXE MAC", "all MACs", ""):
        table.add_column(col, no_wrap=True)
    for r in results:
        if not (r.ok or r.skipped) or not r.data:
            continue
        d = r.data
        macs = "\n".join(esc(m) for m in (d.get("macs") or {}).values() if m)
        table.add_row(esc(r.host), esc(d.get("serial") or "?"), esc(d.get("pxe_mac") or ""), macs,
                      "[dim]already[/]" if r.skipped else "[green]new[/]")
    console.print(table)
    render_failures(results)
    console.print(f"harvested {tally['done']}, already done {tally['already']}, failed {tally['failed']}"
                  + (f", failed earlier (untouched) {tally['skipped_failed_earlier']}"
                     if tally["skipped_failed_earlier"] else ""))
    console.print("exports: " + "  ".join(esc(path) for path in exports.values()), style="dim")


@app.command("pxe-boot")
@with_group("wait", PowerWait)
@with_group("bmc", BmcOptions)
@common_options
def pxe_boot(
    hosts: HostsOpt = None,
    boot_mode: Annotated[
        str | None,
        typer.Option("--boot-mode", help="Override mode: UEFI, Legacy, or keep (default: site policy.pxe_boot_mode)."),
    ] = None,
    power_policy: Annotated[
        PowerPolicy | None,
        typer.Option("--power-policy", help="For servers already on (default: the site's policy.pxe_power_policy)."),
    ] = None,
    *,
    bmc: BmcOptions,
    wait: PowerWait,
    common: Common,
) -> None:
    """Arm a one-time PXE boot on every harvested host, power it on (off first if on), record pxe_armed."""
    if boot_mode not in (None, "UEFI", "Legacy", "keep"):
        raise typer.BadParameter("--boot-mode must be UEFI, Legacy or keep")
    ctx = Context.of(common)
    opts = bmc.run_options(PXE, boot_mode=boot_mode, power_policy=power_policy, power_timeout_s=wait.power_timeout,
                           poll_s=wait.poll)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    results = with_progress(lambda progress: operations.pxe_boot(ctx.site, ctx.store, selected, opts, progress),
                            len(selected), "arming one-time PXE", common.json_out)
    if common.json_out:
        emit_json({"site": ctx.site.name, "counts": counts(results), "hosts": [result_json(r) for r in results]})
    else:
        _render_pxe(results)
    fail_if_any(results)


def _render_pxe(results: list[HostResult]) -> None:
    from rich.table import Table

    tally = counts(results)
    table = Table(title="one-time PXE boot", title_justify="left")
    for col in ("host", "PXE MAC", "override", "resets", "power", ""):
        table.add_column(col)
    for r in results:
        if r.ok and not r.skipped:
            armed = r.data.get("boot_armed", {})
            table.add_row(esc(r.host), esc(r.data.get("pxe_mac") or ""),
                          esc(f"{armed.get('BootSourceOverrideTarget')}/{armed.get('BootSourceOverrideEnabled')}"),
                          esc(" → ".join(r.data.get("resets", []))), esc(r.data.get("power_state") or ""),
                          "[green]armed[/]")
    console.print(table)
    render_failures(results)
    console.print(f"armed {tally['done']}, already {tally['already']}, failed {tally['failed']}, "
                  f"not ready (failed earlier) {tally['skipped_failed_earlier']}")


@app.command("power")
@with_group("wait", PowerWait)
@with_group("bmc", BmcOptions)
@common_options
def power_cmd(
    action: Annotated[PowerAction, typer.Argument(help="on, off, cycle or status.")],
    hosts: HostsOpt = None,
    *,
    bmc: BmcOptions,
    wait: PowerWait,
    common: Common,
) -> None:
    """Power hosts on/off/cycle through their BMCs, or show their power state (no lifecycle change)."""
    ctx = Context.of(common)
    opts = bmc.run_options(POWER, power_timeout_s=wait.power_timeout, poll_s=wait.poll)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    results = with_progress(
        lambda progress: operations.power(ctx.site, ctx.store, selected, action, opts, progress),
        len(selected), f"power {action.value}", common.json_out)
    if common.json_out:
        emit_json({"site": ctx.site.name, "action": action.value, "hosts": [result_json(r) for r in results]})
    else:
        _render_power(action, results)
    fail_if_any(results)


def _render_power(action: PowerAction, results: list[HostResult]) -> None:
    from rich.table import Table

    table = Table(title=f"power {action.value}", title_justify="left")
    for col in ("host", "power", "done"):
        table.add_column(col)
    for r in results:
        if r.ok:
            table.add_row(esc(r.host), esc(r.data.get("power_state")), esc(" → ".join(r.data.get("resets", [])) or "-"))
    console.print(table)
    render_failures(results)


__all__ = ["harvest_macs", "power_cmd", "pxe_boot"]
