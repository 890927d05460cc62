"""Health and bisection commands: `provision health`, `provision bisect`."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from provision.bisect.job_runs import BisectReport, JobRun, make_planner
from provision.bisect.job_runs import bisect as run_bisect
from provision.bisect.planner import BisectPlanError
from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.exits import problems_unless
from provision.command.options import Common, HostsOpt
from provision.command.output import console, emit_json, err_console, esc
from provision.health.errors import HealthError
from provision.health.run import run_health
from provision.health.summary import summarize
from provision.health.verdict import Verdict
from provision.site.select import select_hosts
from provision.slurm.after_step import sync_after_step
from provision.ssh import SshSettings
from provision.state.redact import redact
from provision.steps.runner import HostResult

_STYLE = {"healthy": "green", "unhealthy": "yellow", "critical": "red", "unknown": "magenta"}


def _render_health(payload: dict[str, Any]) -> None:
    from rich.table import Table

    counts = payload["by_verdict"]
    line = "  ".join(f"[{_STYLE[v]}]{v} {n}[/]" for v, n in counts.items() if n)
    console.print(
        f"[bold]{esc(payload['site'])}[/] health {esc(payload['level'])}: {payload['checked']} host(s) checked in "
        f"{payload['duration_s']:.1f} s  {line}"
    )
    for verdict, reasons in payload["top_reasons"].items():
        listed = ", ".join(f"{esc(reason)} ({count})" for reason, count in reasons)
        console.print(f"  [{_STYLE[verdict]}]{verdict}[/]: {listed}")
    bad = [h for h in payload["hosts"] if h["verdict"] != "healthy"]
    if bad:
        table = Table(title="hosts that are not healthy", title_justify="left")
        for col in ("host", "verdict", "reason", "what"):
            table.add_column(col)
        for h in bad[:50]:
            table.add_row(esc(h["host"]), f"[{_STYLE[h['verdict']]}]{h['verdict']}[/]", esc(h["reason"] or ""),
                          esc(h["summary"]))
        console.print(table)
        if len(bad) > 50:
            console.print(f"  … and {len(bad) - 50} more (--json lists every host)")
    if payload["promoted_to_golden"]:
        console.print(f"[green]golden[/]: {len(payload['promoted_to_golden'])} host(s) promoted")
    if payload["skipped"]:
        by_state = ", ".join(f"{esc(state)}: {n}" for state, n in payload["skipped_by_state"].items())
        console.print(
            f"[yellow]skipped {len(payload['skipped'])} host(s)[/] ({by_state}): health runs on hosts that are "
            "configured or further along, or that failed a health check; bring them there first, or check "
            "without recording with --no-record"
        )
    for host, why in payload["not_recorded"].items():
        console.print(f"[red]not recorded[/] {esc(host)}: {esc(why)}")
    if not payload["recorded"] and payload["checked"]:
        console.print("[dim]--no-record: nothing was written to the state store[/]")


@app.command()
@common_options
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
    *,
    common: Common,
) -> None:
    """Run the health agent on every host over SSH; record healthy or failed (reason + evidence); golden set."""
    if level not in ("fast", "long"):
        raise typer.BadParameter("--level is fast or long")
    ctx = Context.of(common)
    from rich.progress import Progress

    with Progress(console=err_console, transient=True, disable=common.json_out or not sys.stderr.isatty()) as bar:
        task = bar.add_task(f"health {level}", total=None)

        def progress(result: HostResult) -> None:
            bar.advance(task)

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
    slurm_line = sync_after_step(ctx.site, ctx.store) if record else None
    if slurm_line is not None:
        payload["slurm_sync"] = slurm_line
    if common.json_out:
        emit_json(payload)
    else:
        _render_health(payload)
        if slurm_line is not None:
            console.print(esc(slurm_line))
    problems_unless(all(r.verdict is Verdict.healthy for r in report.results))


def _bisect_payload(report: BisectReport) -> dict[str, Any]:
    finding = report.finding
    # The command and the jobs' output tails can carry secrets (HF_TOKEN=...): masked as in the state store.
    payload: dict[str, Any] = redact({
        "group": list(report.hosts),
        "command": report.command,
        "strategy": report.strategy,
        "culprits": list(finding.culprits),
        "unexplained": [list(g) for g in finding.unexplained],
        "undecided": list(finding.undecided),
        "job_runs": finding.runs,
        "rounds": finding.rounds,
        "duration_s": round(report.duration_s, 2),
        "recorded": list(report.recorded),
        "runs": [r.as_dict() for r in report.runs],
    })
    return payload


@app.command()
@common_options
def bisect(
    hosts: Annotated[str, typer.Option("--hosts", help="The group whose job fails (same patterns as health).")],
    cmd: Annotated[
        str,
        typer.Option("--cmd", help="Job run on each sub-group's first host; {hosts} {hosts_space} {nnodes} {first}."),
    ],
    strategy: Annotated[str, typer.Option("--strategy", help="adaptive (default) or grid (Imbue's).")] = "adaptive",
    rounds: Annotated[int, typer.Option("--rounds", help="Rounds the adaptive search aims for.", min=1)] = 3,
    min_hosts: Annotated[int, typer.Option("--min-hosts", help="Fewest hosts the job runs on.", min=1)] = 2,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per job run (a hang fails).", min=0.1)] = 600.0,
    record: Annotated[
        bool, typer.Option("--record/--no-record", help="Mark culprits failed (bisect_culprit) or only report.")
    ] = True,
    *,
    common: Common,
) -> None:
    """Find the bad host(s) in a group whose multi-host job fails, by running it on sub-groups over SSH."""
    ctx = Context.of(common)
    group = [h.hostname for h in select_hosts(ctx.site, hosts)]
    try:
        planner_check = make_planner(strategy, group, min_hosts=min_hosts, rounds=rounds)
    except BisectPlanError as exc:
        raise HealthError(f"--hosts {hosts}: {exc}") from None
    del planner_check

    def progress(round_no: int, runs: list[JobRun]) -> None:
        if not common.json_out:
            failed = sum(1 for r in runs if not r.passed)
            err_console.print(f"  round {round_no}: {len(runs)} job run(s), {failed} failed", style="dim")

    report = run_bisect(
        group, cmd, SshSettings.from_site(ctx.site), strategy=strategy, min_hosts=min_hosts, rounds=rounds,
        timeout_s=timeout, store=ctx.store if record else None, progress=progress,
    )
    payload = _bisect_payload(report)
    if common.json_out:
        emit_json(payload)
    else:
        console.print(
            f"bisect ({esc(strategy)}) over {len(group)} hosts: {payload['job_runs']} job runs in {payload['rounds']} "
            f"rounds, {payload['duration_s']:.1f} s"
        )
        for host in payload["culprits"]:
            console.print(f"  [red]culprit[/] {esc(host)}" + ("  (recorded: failed, bisect_culprit)" if record else ""))
        for group_hosts in payload["unexplained"]:
            console.print(
                f"  [yellow]unexplained[/]: the job failed on {len(group_hosts)} hosts together but on no smaller "
                "group (a link between hosts, a switch, or an intermittent failure)"
            )
        if payload["undecided"]:
            undecided = ", ".join(esc(host) for host in payload["undecided"])
            console.print(f"  [yellow]undecided[/] (too few cleared hosts to pad with): {undecided}")
        if not payload["culprits"] and not payload["unexplained"]:
            console.print("  no failing job: every sub-group passed")
    problems_unless(not payload["culprits"] and not payload["unexplained"])
