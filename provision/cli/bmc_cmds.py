"""BMC commands: harvest-macs, pxe-boot, power. Thin: options, one library call, a table or JSON."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.bmc import Fanout, HostResult, PowerAction, PowerPolicy, RunOptions, harvested
from provision.bmc.export import default_paths, write_exports
from provision.cli.app import DbOpt, JsonOpt, SiteOpt, app
from provision.cli.context import Context
from provision.cli.output import console, emit_json, esc, get_console
from provision.errors import BringupError
from provision.redfish import ClientOptions
from provision.site.select import select_hosts

HostsOpt = Annotated[
    str | None, typer.Option("--hosts", help="Comma-separated host name globs, e.g. 'gpu-r1-*,ctl-01' (default: all).")
]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, max=4096, help="BMCs talked to at once.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds per Redfish request.")]
HostTimeoutOpt = Annotated[float, typer.Option("--host-timeout", min=1, help="Seconds for one host's whole step.")]
RetriesOpt = Annotated[int, typer.Option("--retries", min=0, max=10, help="Retries on 5xx/connection errors.")]
AuthOpt = Annotated[str, typer.Option("--auth", help="'session' (X-Auth-Token, deleted after) or 'basic'.")]


def _options(
    concurrency: int, timeout: float, host_timeout: float, retries: int, auth: str, **extra: Any
) -> RunOptions:
    if auth not in ("session", "basic"):
        raise typer.BadParameter("--auth must be 'session' or 'basic'")
    client = ClientOptions(timeout_s=timeout, retries=retries, auth="session" if auth == "session" else "basic")
    return RunOptions(concurrency=concurrency, host_timeout_s=host_timeout, client=client, **extra)


def _result_json(r: HostResult) -> dict[str, Any]:
    out: dict[str, Any] = {"host": r.host, "ok": r.ok, "skipped": r.skipped}
    if r.reason:
        out.update(reason=r.reason, detail=r.detail, remediation=r.remediation)
    if r.ok or r.skipped:
        out["data"] = r.data
    else:
        out["evidence"] = r.data
    return out


def _counts(results: list[HostResult]) -> dict[str, int]:
    c = Counter("failed" if not r.ok and not r.skipped else ("already" if r.skipped else "done") for r in results)
    failed_before = sum(1 for r in results if r.skipped and not r.ok)
    return {"done": c["done"], "already": c["already"] - failed_before, "failed": c["failed"],
            "skipped_failed_earlier": failed_before}


def _render_failures(results: list[HostResult]) -> None:
    from rich.table import Table

    failed = [r for r in results if not r.ok and not r.skipped]
    if not failed:
        return
    table = Table(title=f"failed hosts ({len(failed)})", title_justify="left")
    for col in ("host", "reason", "what happened", "what to do"):
        table.add_column(col, overflow="fold", no_wrap=col in ("host", "reason"))
    for r in sorted(failed, key=lambda r: (r.reason or "", r.host)):
        table.add_row(esc(r.host), f"[red]{esc(r.reason)}[/]", esc(r.detail), esc(r.remediation))
    console.print(table)
    by_reason = Counter(r.reason for r in failed)
    console.print("triage: " + ", ".join(f"{esc(reason)} x{n}" for reason, n in sorted(by_reason.items())))


class HostsFailed(BringupError):
    """Some hosts failed this run (each is in the table/JSON above and recorded with its reason)."""


def _fail_if_any(results: list[HostResult]) -> None:
    failed = [r for r in results if not r.ok and not r.skipped]
    if failed:
        reasons = Counter(r.reason for r in failed)
        summary = ", ".join(f"{reason} x{n}" for reason, n in sorted(reasons.items()))
        raise HostsFailed(f"{len(failed)} of {len(results)} hosts failed ({summary})")


def _run(fanout: Fanout, run: Callable[[], Coroutine[Any, Any, list[HostResult]]], total: int, what: str,
         json_out: bool) -> list[HostResult]:
    """`run()` under a progress bar counting hosts done and failed (none with --json)."""
    if json_out:
        return asyncio.run(run())
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("[red]{task.fields[failed]} failed"), TimeElapsedColumn())
    with Progress(*columns, console=get_console(), transient=True) as bar:
        task = bar.add_task(what, total=total, failed=0)

        def advance(result: HostResult) -> None:
            # A host skipped because it failed in an earlier run is not a failure of this one.
            failed = bar.tasks[task].fields["failed"] + (0 if result.ok or result.skipped else 1)
            bar.update(task, advance=1, failed=failed)

        fanout.progress = advance
        return asyncio.run(run())


@app.command("harvest-macs")
def harvest_macs(
    hosts: HostsOpt = None,
    concurrency: ConcurrencyOpt = 128,
    timeout: TimeoutOpt = 10.0,
    host_timeout: HostTimeoutOpt = 120.0,
    retries: RetriesOpt = 2,
    auth: AuthOpt = "session",
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
    site: SiteOpt = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Ask every BMC for its NICs, pick the PXE NIC, record macs_harvested (or failed with a reason)."""
    ctx = Context.open(site, db)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    fanout = Fanout(ctx.site, ctx.store, _options(concurrency, timeout, host_timeout, retries, auth))
    results = _run(fanout, lambda: fanout.harvest_macs(selected), len(selected), "harvesting MACs", json_out)
    # Exports cover every harvested host of the site; this run's results already hold their summaries.
    inventories = {r.host: r.data for r in results if r.ok and r.data}
    inventories.update(harvested(ctx.store, [h for h in ctx.site.hosts() if h.hostname not in inventories]))
    given = {"csv": csv_path, "yaml": yaml_path, "dhcpd": dhcpd_path, "dnsmasq": dnsmasq_path}
    exports = {name: given[name] or path for name, path in default_paths(ctx.site, ctx.store.path.parent).items()}
    write_exports(ctx.site, inventories, exports)
    order = {h.hostname: i for i, h in enumerate(ctx.site.hosts())}
    results.sort(key=lambda r: order.get(r.host, 0))
    counts = _counts(results)
    if json_out:
        emit_json({"site": ctx.site.name, "counts": counts, "hosts": [_result_json(r) for r in results],
                   "exports": {name: str(path) for name, path in exports.items()}})
    else:
        from rich.table import Table

        table = Table(title=f"MACs of {esc(ctx.site.name)}", title_justify="left")
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
        _render_failures(results)
        console.print(f"harvested {counts['done']}, already done {counts['already']}, failed {counts['failed']}"
                      + (f", failed earlier (untouched) {counts['skipped_failed_earlier']}"
                         if counts["skipped_failed_earlier"] else ""))
        console.print("exports: " + "  ".join(esc(path) for path in exports.values()), style="dim")
    _fail_if_any(results)


@app.command("pxe-boot")
def pxe_boot(
    hosts: HostsOpt = None,
    concurrency: ConcurrencyOpt = 128,
    timeout: TimeoutOpt = 10.0,
    host_timeout: HostTimeoutOpt = 300.0,
    retries: RetriesOpt = 2,
    auth: AuthOpt = "session",
    boot_mode: Annotated[
        str | None,
        typer.Option("--boot-mode", help="Override mode: UEFI, Legacy, or keep (default: site policy.pxe_boot_mode)."),
    ] = None,
    power_policy: Annotated[
        PowerPolicy | None,
        typer.Option("--power-policy", help="For servers already on (default: the site's policy.pxe_power_policy)."),
    ] = None,
    power_timeout: Annotated[float, typer.Option("--power-timeout", min=1, help="Seconds to wait for PowerState.")]
    = 60.0,
    poll: Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between PowerState reads.")] = 1.0,
    site: SiteOpt = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Arm a one-time PXE boot on every harvested host, power it on (off first if on), record pxe_armed."""
    if boot_mode not in (None, "UEFI", "Legacy", "keep"):
        raise typer.BadParameter("--boot-mode must be UEFI, Legacy or keep")
    ctx = Context.open(site, db)
    opts = _options(concurrency, timeout, host_timeout, retries, auth, boot_mode=boot_mode,
                    power_policy=power_policy, power_timeout_s=power_timeout, poll_s=poll)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    fanout = Fanout(ctx.site, ctx.store, opts)
    results = _run(fanout, lambda: fanout.pxe_boot(selected), len(selected), "arming one-time PXE", json_out)
    results.sort(key=lambda r: r.host)
    counts = _counts(results)
    if json_out:
        emit_json({"site": ctx.site.name, "counts": counts, "hosts": [_result_json(r) for r in results]})
    else:
        from rich.table import Table

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
        _render_failures(results)
        console.print(f"armed {counts['done']}, already {counts['already']}, failed {counts['failed']}, "
                      f"not ready (failed earlier) {counts['skipped_failed_earlier']}")
    _fail_if_any(results)


@app.command("power")
def power_cmd(
    action: Annotated[PowerAction, typer.Argument(help="on, off, cycle or status.")],
    hosts: HostsOpt = None,
    concurrency: ConcurrencyOpt = 128,
    timeout: TimeoutOpt = 10.0,
    host_timeout: HostTimeoutOpt = 300.0,
    retries: RetriesOpt = 2,
    auth: AuthOpt = "session",
    power_timeout: Annotated[float, typer.Option("--power-timeout", min=1, help="Seconds to wait for PowerState.")]
    = 60.0,
    poll: Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between PowerState reads.")] = 1.0,
    site: SiteOpt = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Power hosts on/off/cycle through their BMCs, or show their power state (no lifecycle change)."""
    ctx = Context.open(site, db)
    opts = _options(concurrency, timeout, host_timeout, retries, auth, power_timeout_s=power_timeout, poll_s=poll)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    fanout = Fanout(ctx.site, ctx.store, opts)
    results = _run(fanout, lambda: fanout.power(selected, action), len(selected), f"power {action.value}", json_out)
    results.sort(key=lambda r: r.host)
    if json_out:
        emit_json({"site": ctx.site.name, "action": action.value, "hosts": [_result_json(r) for r in results]})
    else:
        from rich.table import Table

        table = Table(title=f"power {action.value}", title_justify="left")
        for col in ("host", "power", "done"):
            table.add_column(col)
        for r in results:
            if r.ok:
                table.add_row(esc(r.host), esc(r.data.get("power_state")),
                              esc(" → ".join(r.data.get("resets", [])) or "-"))
        console.print(table)
        _render_failures(results)
    _fail_if_any(results)


__all__ = ["harvest_macs", "power_cmd", "pxe_boot"]
