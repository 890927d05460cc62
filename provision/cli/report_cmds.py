"""`provision report`: the whole bring-up of a site as one static HTML page, or the same data as JSON."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

# Registered beside the lifecycle commands it summarizes (status, history): Typer runs a lone registered command
# as the whole program, so `provision report` must never be the only command loaded.
import provision.cli.lifecycle_cmds  # noqa: F401
from provision.cli.app import app, common_options
from provision.command.context import Context, require_directories
from provision.command.options import Common
from provision.command.output import console, emit_json, esc


@app.command()
@common_options
def report(
    *,
    common: Common,
    run_dir: Annotated[Path | None, typer.Option(
        "--run-dir", help="Where the other tools' results are (fabric-validate.json, ethernet-check.json, the "
        "training job's metrics.jsonl); default: the state database's directory.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="The HTML file to write (default: RUN_DIR/report/report.html).")] = None,
    training: Annotated[Path | None, typer.Option(
        "--training", help="The training job's JSONL (default: the newest metrics.jsonl under RUN_DIR).")] = None,
) -> None:
    """One static HTML page: lifecycle per rack, failed hosts, fabric map, Ethernet, health, burn-in, training."""
    from report import as_json, default_output, gather, write_html

    started = time.monotonic()
    require_directories({"out": out})
    ctx = Context.of(common)
    site = ctx.site
    folder = run_dir or ctx.store.path.parent
    result = gather(site.name, ctx.store, folder, site.fabric_design, training, site=site)
    if common.json_out:
        emit_json(as_json(result))
        return
    path = write_html(result, out or default_output(folder))
    console.print(f"report: {esc(str(path))} ({result.hosts} hosts, {len(result.failed)} failed, "
                  f"{time.monotonic() - started:.2f} s)")
