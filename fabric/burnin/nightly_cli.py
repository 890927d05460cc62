"""`fabric burnin nightly --site S --budget 2h [--cycle 7] [--in-use HOSTFILE]`: burn idle golden hosts' links.

Exit codes are every command's (provision/command/exits.py): 1 when it could not burn (a bad option or file, too
few idle hosts: one line on stderr), 2 when it burned and flagged links."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from fabric.burnin.actions import Opened, judge_run, link_rows, open_site, plan_site, run_site
from fabric.burnin.nightly import Flag, choose_stages, flags, hostfile_hosts, parse_budget, prometheus
from fabric.burnin.stage_run import RunOptions
from fabric.captures import read_capture
from fabric.errors import FabricError
from fabric.options import DbOpt, JsonOpt, SiteOpt, site_path
from provision.command.exits import problems_unless
from provision.state import State

STAGE_OVERHEAD_S = 60.0  # launching, counters and cleanup around each stage's duration


def _idle_golden(opened: Opened, in_use: Path | None) -> tuple[set[str], set[str]]:
    golden = set(opened.store.in_state(State.golden))
    busy = hostfile_hosts(read_capture(in_use, "--in-use")) if in_use is not None else set()
    return golden - busy, golden & busy


def _write(path: Path | None, text: str) -> None:
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # the textfile collector never reads half a file
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        raise FabricError(f"{path}: cannot write: {e.strerror or e}") from None


def _budget(text: str) -> float:
    try:
        return parse_budget(text)
    except ValueError as e:
        raise FabricError(f"--budget: {e}") from None


def _night(text: str | None) -> date:
    if text is None:
        return datetime.now(UTC).date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise FabricError(f"--night {text!r}: a date as YYYY-MM-DD") from None


def nightly(site: Path, budget_s: float, cycle: int, in_use: Path | None, duration: int, routing: str,
            db: Path | None, today: date) -> dict[str, Any]:
    opened = open_site(site, db)
    idle, busy = _idle_golden(opened, in_use)
    if len(idle) < 2:
        raise FabricError(f"{len(idle)} idle golden host(s) ({len(busy)} in the running job): nothing to burn")
    plan = plan_site(site, routing, None, None, only=idle, db=db)
    history = opened.history.link_history()
    fits = int(budget_s // (duration + STAGE_OVERHEAD_S))
    stages, due_left = choose_stages(plan, history, today, cycle, fits)
    tonight = {**plan, "stages": [s if i in stages else [] for i, s in enumerate(plan["stages"], start=1)]}
    night = today.isoformat()
    # a retry stage (around links that failed) only when the budget has room for one more stage
    report = run_site(opened, tonight, RunOptions(duration), kind="nightly", night=night, retry=fits > len(stages),
                      routing=routing)
    run_id, j = judge_run(opened, report.run)
    burned = {lk for i in stages for f in plan["stages"][i - 1] for lk in f["links"]}
    rows = [r for r in link_rows(run_id, night, j, time.time()) if r.link in burned]
    opened.history.record_links(run_id, night, rows)
    history = opened.history.link_history()
    flagged = flags(rows, history)
    return {"night": night, "run": run_id, "idle_hosts": sorted(idle), "in_use": sorted(busy),
            "stages_run": stages, "stages_in_plan": len(plan["stages"]), "links_burned": len(rows),
            "due_but_over_budget": due_left, "flags": [f.__dict__ for f in flagged],
            "counts": dict(j.counts), "prometheus": prometheus(history, flagged, today)}


def _text(out: dict[str, Any]) -> str:
    lines = [f"nightly burn-in {out['night']} (run {out['run']}): {len(out['idle_hosts'])} idle golden hosts, "
             f"{len(out['in_use'])} in the running job left alone; stages {out['stages_run']} of "
             f"{out['stages_in_plan']}, {out['links_burned']} links burned"]
    lines += [f"FLAG {f['name']}: {f['why']}" for f in out["flags"]]
    if out["due_but_over_budget"]:
        lines.append(f"{len(out['due_but_over_budget'])} link(s) are due (cycle) but did not fit the budget: "
                     "raise --budget or shorten --duration")
    return "\n".join(lines) + "\n"


def nightly_command(
    site: SiteOpt = None,
    budget: Annotated[str, typer.Option("--budget", help="Time for tonight's stages (2h, 90m).")] = "2h",
    cycle: Annotated[int, typer.Option("--cycle", min=1, max=365, help="Every link burned at least once every N "
                                       "nights.")] = 7,
    in_use: Annotated[Path | None, typer.Option("--in-use", help="The running job's hostfile: never touched.")
                      ] = None,
    duration: Annotated[int, typer.Option("--duration", min=1, max=86400, help="Seconds per stage.")] = 600,
    routing: Annotated[str, typer.Option("--routing", help="`live`, or an LFT dump file.")] = "live",
    report: Annotated[Path | None, typer.Option("--report", help="Also write the report here.")] = None,
    prom: Annotated[Path | None, typer.Option("--prom", help="Prometheus textfile (node exporter collector).")
                    ] = None,
    night: Annotated[str | None, typer.Option("--night", help="The night's date (default: today, UTC).")] = None,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Burn the links of golden hosts not in a running job, within the budget, rotating over `cycle` nights."""
    out = nightly(site_path(site), _budget(budget), cycle, in_use, duration, routing, db, _night(night))
    text = json.dumps({k: v for k, v in out.items() if k != "prometheus"}, indent=1) + "\n" if as_json else _text(out)
    _write(report, text)
    _write(prom, out["prometheus"])
    sys.stdout.write(text)
    problems_unless(not out["flags"])


__all__ = ["Flag", "nightly_command"]
