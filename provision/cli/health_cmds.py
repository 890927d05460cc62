"""Health and bisection commands: `provision health`, `provision bisect`."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from provision.cli.app import DbOpt, JsonOpt, SiteOpt, app
from provision.cli.context import Context
from provision.cli.output import console, emit_json, err_console
from provision.health.run import run_health
from provision.health.summary import summarize
from provision.health.verdict import HostHealth, Verdict

HostsOpt = Annotated[
    str | None,
    typer.Option(
        "--hosts",
        help="Hosts: globs, ranges (gpu-r1-[01-04]), rack:NAME or @HOSTFILE, comma-separated (default: GPU hosts).",
    ),
]

_STYLE = {"healthy": "green", "unhealthy": "yellow", "critical": "red", "unknown": "magenta"}


def _render_health(payload: dict[str, Any]) -> None:
    from rich.table import Table

    counts = payload["by_verdict"]
    line = "  ".join(f"[{_STYLE[v]}]{v} {n}[/]" for v, n in counts.items() if n)
    console.print(
        f"[bold]{payload['site']}[/] health {payload['level']}: {payload['checked']} host(s) checked in "
        f"{payload['duration_s']:.1f} s  {line}"
    )
    for verdict, reasons in payload["top_reasons"].items():
        listed = ", ".join(f"{reason} ({count})" for reason, count in reasons)
        console.print(f"  [{_STYLE[verdict]}]{verdict}[/]: {listed}")
    bad = [h for h in payload["hosts"] if h["verdict"] != "healthy"]
    if bad:
        table = Table(title="hosts that are not healthy", title_justify="left")
        for col in ("host", "verdict", "reason", "what"):
            table.add_column(col)
        for h in bad[:50]:
            table.add_row(h["host"], f"[{_STYLE[h['verdict']]}]{h['verdict']}[/]", h["reason"] or "", h["summary"])
        console.print(table)
        if len(bad) > 50:
            console.print(f"  … and {len(bad) - 50} more (--json lists every host)")
    if payload["promoted_to_golden"]:
        console.print(f"[green]golden[/]: {len(payload['promoted_to_golden'])} host(s) promoted")
    if payload["skipped"]:
        by_state = ", ".join(f"{state}: {n}" for state, n in payload["skipped_by_state"].items())
        console.print(
            f"[yellow]skipped {len(payload['skipped'])} host(s)[/] ({by_state}): health runs on hosts that are "
            "configured or further along, or that failed a health check; bring them there first, or check "
            "without recording with --no-record"
        )
    for host, why in payload["not_recorded"].items():
        console.print(f"[red]not recorded[/] {host}: {why}")
    if not payload["recorded"] and payload["checked"]:
        console.print("[dim]--no-record: nothing was written to the state store[/]")


@app.command()
def health(
    hosts: HostsOpt = None,
    level: Annotated[str, typer.Option("--level", help="fast (seconds) or long (minutes: GPU stress, NCCL).")] = "fast",
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Hosts at a time (default: the site's policy).", min=1)
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds per host (default: the site's policy).", min=0.1)
    ] = None,
    record: Annotated[
        bool, typer.Option("--record/--no-record", help="Write verdicts to the lifecycle (default) or only report.")
    ] = True,
    site: SiteOpt = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run the health agent on every host over SSH; record healthy or failed (reason + evidence); golden set."""
    if level not in ("fast", "long"):
        raise typer.BadParameter("--level is fast or long")
    ctx = Context.open(site, db)
    done = 0

    def progress(result: HostHealth) -> None:
        nonlocal done
        done += 1
        if not json_out and sys.stderr.isatty():
            err_console.print(f"  {done:>4}  {result.host:<20} {result.verdict.value}", style=_STYLE[result.verdict])

    report = run_health(
        ctx.site,
        ctx.store,
        pattern=hosts,
        level=level,
        concurrency=concurrency,
        timeout_s=timeout,
        record=record,
        progress=progress,
    )
    payload = summarize(report)
    if json_out:
        emit_json(payload)
    else:
        _render_health(payload)
    if any(r.verdict is not Verdict.healthy for r in report.results):
        raise typer.Exit(1)
