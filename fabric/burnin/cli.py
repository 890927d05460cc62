"""`fabric burnin`: plan InfiniBand burn-in stages from the fabric's real forwarding tables, run them, judge.

`plan --discovered ibnetdiscover.txt --routing lfts.txt` needs no site: every HCA whose node
description names a host takes part (`--hosts 'gpu-*'` keeps only matching hosts). `--routing` is the
output of `dump_lfts` or the concatenated `ibroute` of every switch, taken after the SM programmed them.
`plan --site S [--routing live]` plans the site's GPU hosts on the fabric as it is now. `run --plan P
--site S` runs it over SSH (resumable); `judge --site S` judges the last run, records the hosts' moves
(`--record`) and hands failing links to the port plan; `nightly` burns idle golden hosts' links.
Exit codes are every command's (provision/command/exits.py): an error (a bad file, another site's database) is
one readable line on stderr and exit 1; `judge` with failing links and `nightly` with flagged links exit 2.
"""

from __future__ import annotations

import fnmatch
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from fabric.burnin.actions import judge_run, link_rows, load_plan, open_site, plan_site, run_site
from fabric.burnin.engine import MAX_LOG, RoutingEngine, parse_opensm_log
from fabric.burnin.lft import parse_lfts
from fabric.burnin.nightly_cli import nightly_command
from fabric.burnin.plan import make_plan
from fabric.burnin.render import plan_json
from fabric.burnin.report import judgement_json, judgement_text, plan_summary
from fabric.burnin.routes import build_routing
from fabric.burnin.stage_run import RunOptions, StageReport
from fabric.burnin.step import record_verdicts
from fabric.captures import read_capture, read_capture_bytes
from fabric.errors import FabricError
from fabric.identify import ca_name_from_description
from fabric.options import DbOpt, JsonOpt, SiteOpt, SiteOrNone, site_path
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.topology import NodeType
from provision.command.exits import problems_unless
from provision.slurm.after_step import sync_after_step

burnin_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _plan_files(discovered: Path, routing: Path, hosts: str | None, engine: RoutingEngine | None) -> dict[str, Any]:
    top = parse_ibnetdiscover(read_capture(discovered, "--discovered"), str(discovered))
    dump = parse_lfts(read_capture_bytes(routing, "--routing"), str(routing))
    chosen = None
    if hosts is not None:
        chosen = {label.split("/", 1)[0] for n in top.nodes.values() if n.type is not NodeType.SWITCH
                  and (label := ca_name_from_description(n.description)) is not None}
        chosen = {h for h in chosen if fnmatch.fnmatchcase(h, hosts)}
        if not chosen:
            raise FabricError(f"no host in {discovered} matches --hosts {hosts!r}")
    return plan_json(make_plan(build_routing(top, dump, chosen)), engine)


@burnin_app.command("plan")
def plan_command(
    discovered: Annotated[Path | None, typer.Option("--discovered", help="ibnetdiscover output of the fabric.")
                          ] = None,
    routing: Annotated[str, typer.Option("--routing", help="dump_lfts output or every switch's ibroute; "
                                         "`live`: read from the switches (with --site).")] = "live",
    site: SiteOrNone = None,
    hosts: Annotated[str | None, typer.Option("--hosts", help="Only hosts matching this glob take part.")] = None,
    opensm_log: Annotated[Path | None, typer.Option(
        "--opensm-log", help="opensm's log of the routing that programmed the tables: the plan names the engine, "
        "warns of a fallback.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The plan as JSON (what `fabric burnin run` reads).")
                       ] = False,
    all_hosts: Annotated[bool, typer.Option("--all-hosts", help="With --site: hosts in any state, not only "
                                            "healthy, burned_in or golden ones.")] = False,
    db: DbOpt = None,
) -> None:
    """Stages of HCA-to-HCA flows that burn every routed directed link at full rate."""
    engine = None
    if opensm_log is not None:
        engine = parse_opensm_log(read_capture(opensm_log, "--opensm-log")[-MAX_LOG:], str(opensm_log))
    if site is not None:
        plan = plan_site(site, routing, discovered, hosts, db=db, all_hosts=all_hosts, engine=engine)
    elif discovered is None or routing == "live":
        raise FabricError("without --site, give --discovered FILE and --routing FILE")
    else:
        plan = _plan_files(discovered, Path(routing), hosts, engine)
    sys.stdout.write(json.dumps(plan, indent=1) + "\n" if as_json else plan_summary(plan))


@burnin_app.command("run")
def run_command(
    plan_file: Annotated[Path, typer.Option("--plan", help="A plan from `fabric burnin plan --json`.")],
    site: SiteOpt = None,
    duration: Annotated[int, typer.Option("--duration", min=1, max=86400, help="Seconds per stage (ib_write_bw -D).")
                        ] = 600,
    gpudirect: Annotated[bool, typer.Option("--gpudirect", help="--use_cuda with the GPU each HCA pairs with.")
                         ] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=4096, help="SSH sessions set up at once.")
                           ] = 128,
    grace: Annotated[float, typer.Option("--grace", min=0.0, max=600.0, help="Seconds between the servers' start "
                                         "and the clients' (the servers must be listening).")] = 2.0,
    retry: Annotated[bool, typer.Option("--retry/--no-retry", help="Burn again, around the links that failed, the "
                                        "links only slowed flows reached.")] = True,
    db: DbOpt = None,
) -> None:
    """Run each stage as ib_write_bw pairs over SSH; a killed run resumes at the stage it was in."""
    opened = open_site(site_path(site), db)
    plan = load_plan(plan_file)

    def progress(r: StageReport) -> None:
        sys.stdout.write(f"stage {r.stage}: {r.flows} flows, {r.ok} measured, {r.unknown} unknown "
                         f"({r.seconds:.1f} s)\n")
        sys.stdout.flush()

    opts = RunOptions(duration, gpudirect, concurrency, start_grace_s=grace)
    report = run_site(opened, plan, opts, progress=progress, retry=retry)
    if report.skipped:
        sys.stdout.write(f"run {report.run}: stages {', '.join(map(str, report.skipped))} were done before\n")
    sys.stdout.write(f"run {report.run}: done; `fabric burnin judge --site {site_path(site)}` judges it\n")


@burnin_app.command("judge")
def judge_command(
    site: SiteOpt = None,
    run: Annotated[int | None, typer.Option("--run", help="Run id (default: the latest).")] = None,
    record: Annotated[bool, typer.Option("--record", help="Move hosts: burned_in / failed, then golden.")] = False,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Every link pass/fail/unknown/not_covered against the site's floor; failing links for the port plan (exit 2)."""
    opened = open_site(site_path(site), db)
    run_id, j = judge_run(opened, run)
    opened.history.record_links(run_id, None, link_rows(run_id, None, j, time.time()))
    moved = record_verdicts(opened.site, opened.store, j.hosts, run_id) if record else None
    slurm_line = sync_after_step(opened.site, opened.store) if record else None
    if as_json:
        out = judgement_json(run_id, j, moved)
        if slurm_line is not None:
            out["slurm_sync"] = slurm_line
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    else:
        sys.stdout.write(judgement_text(run_id, j, moved) + (f"{slurm_line}\n" if slurm_line else ""))
    problems_unless(not j.failing())


burnin_app.command("nightly")(nightly_command)


@burnin_app.callback()
def _group() -> None:
    """Keeps `plan` a subcommand (typer folds a one-command app into the command itself)."""
