"""`provision maas ...`: enlist, commission and deploy PXE-armed hosts through MAAS."""

from __future__ import annotations

import asyncio
import math
import ssl
from typing import Annotated

import typer

from provision.cli.app import app, common_options
from provision.cli.step_view import render_reconciled, with_progress
from provision.command.context import Context
from provision.command.exits import problems_unless
from provision.command.options import Common, HostsOpt
from provision.command.output import console, emit_json, esc
from provision.errors import BringupError
from provision.site.model import Maas
from provision.site.select import select_hosts
from provision.site.tls import tls_context
from provision.state import State

maas_app = typer.Typer(help="MAAS: enlist with harvested MACs, commission, deploy.", no_args_is_help=True)
app.add_typer(maas_app, name="maas")

def _client(ctx: Context) -> object:
    from provision.maas.client import MaasClient
    from provision.site.credentials import resolve

    maas = _maas(ctx)
    return MaasClient(str(maas.url), resolve(maas.api_key, ctx.site.directory), verify=_tls(ctx, maas))


def _tls(ctx: Context, maas: Maas) -> ssl.SSLContext:
    """As for the BMCs: verified unless the site opts out, against its CA bundle when it names one."""
    bundle = ctx.site.directory / maas.ca_bundle if maas.ca_bundle is not None else None
    return tls_context(maas.verify_tls, bundle, service="MAAS")


def _maas(ctx: Context) -> Maas:
    maas = ctx.site.spec.maas
    if maas is None:
        raise BringupError(f"site {ctx.site.name} declares no MAAS endpoint (maas: url, api_key)")
    return maas


def _seconds(option: str, value: float, low: float, high: float) -> float:
    """A duration option in [low, high]: click's FloatRange lets NaN through (every comparison is false)."""
    if not math.isfinite(value) or not low <= value <= high:
        raise typer.BadParameter(f"{value!r} is not a number of seconds from {low:g} to {high:g}",
                                 param_hint=option)
    return value


@maas_app.command("deploy")
@common_options
def deploy(
    hosts: HostsOpt = None,
    distro: Annotated[
        str | None, typer.Option("--distro", help="OS series to deploy (default: the site's maas.distro_series).")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=1024)] = 32,
    timeout: Annotated[float, typer.Option("--timeout", help="Per-host deadline in seconds (1 to 604800).",
                                           callback=lambda v: _seconds("--timeout", v, 1.0, 7 * 86400.0))] = 1800.0,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between status polls (0.01 to 600).",
                                        callback=lambda v: _seconds("--poll", v, 0.01, 600.0))] = 2.0,
    *,
    common: Common,
) -> None:
    """Enlist every PXE-armed host in MAAS, wait for commissioning, deploy the OS, record each step."""
    from provision.maas.client import MaasClient
    from provision.maas.step import DeployOptions, deploy_hosts

    ctx = Context.of(common)
    selected = select_hosts(ctx.site, hosts, everyone=True)
    maas = _maas(ctx)
    client = _client(ctx)
    assert isinstance(client, MaasClient)
    options = DeployOptions(distro_series=distro or maas.distro_series, architecture=maas.architecture,
                            concurrency=concurrency, host_timeout_s=timeout, poll_s=poll)
    results = with_progress(lambda progress: deploy_hosts(ctx.site, ctx.store, client, options, selected, progress),
                            len(selected), "MAAS: enlist, commission, deploy", common.json_out)
    failed = [r for r in results if r.state is State.failed]
    if common.json_out:
        emit_json([{"host": r.host, "state": r.state.value if r.state else None, "reason": r.reason,
                    "detail": r.detail, "remediation": r.remediation, "system_id": r.data.get("system_id"),
                    "reconciled": list(r.reconciled)}
                   for r in results])
    else:
        from rich.table import Table

        table = Table(title="MAAS deployment", title_justify="left")
        for col in ("host", "state", "reason", "detail", "what to do"):
            table.add_column(col, overflow="fold")
        for r in sorted(results, key=lambda r: r.host):
            state = r.state.value if r.state else "?"
            style = "red" if r.state is State.failed else ("green" if r.state is State.deployed else "dim")
            table.add_row(esc(r.host), f"[{style}]{state}[/]", esc(r.reason or ""), esc(r.detail),
                          esc(r.remediation))
        console.print(table)
        render_reconciled(results)
        deployed = sum(r.state is State.deployed for r in results)
        console.print(f"{deployed} deployed, {len(failed)} failed, {len(results) - deployed - len(failed)} skipped")
    problems_unless(not failed)


@maas_app.command("machines")
@common_options
def machines(*, common: Common) -> None:
    """What MAAS knows: every machine with its status."""
    from provision.maas.client import MaasClient

    ctx = Context.of(common)
    client = _client(ctx)
    assert isinstance(client, MaasClient)

    async def run() -> list[dict[str, object]]:
        async with client:
            return [
                {"hostname": m.hostname, "system_id": m.system_id, "status": m.status_name,
                 "message": m.status_message, "power": m.power_state, "boot_mac": m.boot_mac}
                for m in await client.machines()
            ]

    rows = asyncio.run(run())
    if common.json_out:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table(title="MAAS machines", title_justify="left")
    for col in ("hostname", "system_id", "status", "power", "boot_mac", "message"):
        table.add_column(col)
    for r in rows:
        table.add_row(*(esc(r[c] or "") for c in ("hostname", "system_id", "status", "power", "boot_mac", "message")))
    console.print(table)
