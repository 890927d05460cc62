"""`provision metrics targets|write`: Prometheus scrape targets from the state store, and the lifecycle
snapshot (provision/metrics) written now, for the moves no step runner made (`provision mark`, `record`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.options import Common
from provision.command.output import console, emit_json, esc
from provision.metrics.stages import write_lifecycle
from provision.metrics.targets import Ports, scrape_targets, target_hosts, write_targets

metrics_app = typer.Typer(help="Prometheus: scrape targets from the state store, the lifecycle snapshot.",
                          no_args_is_help=True)
app.add_typer(metrics_app, name="metrics")


@metrics_app.command("targets")
@common_options
def targets(
    out: Annotated[Path, typer.Option("--out", help="Directory of the file_sd files (node, dcgm, training .json).")],
    node_port: Annotated[int, typer.Option("--node-port", help="Node exporter port on the hosts.")] = 9100,
    dcgm_port: Annotated[int, typer.Option("--dcgm-port", help="dcgm-exporter port on the GPU hosts.")] = 9400,
    lifecycle: Annotated[bool, typer.Option("--lifecycle/--no-lifecycle",
                                            help="Also rewrite the lifecycle snapshot.")] = True,
    *, common: Common,
) -> None:
    """Write one file_sd_configs file per job from the hosts' states and OS addresses (Prometheus re-reads them)."""
    ctx = Context.of(common)
    try:
        hosts = target_hosts(ctx.store, ((h.hostname, h.rack, h.role) for h in ctx.index.hosts))
        groups = scrape_targets(hosts, Ports(node_port, dcgm_port))
        changed = write_targets(out, groups)
        snapshot = write_lifecycle(ctx.store, time.time()) if lifecycle else None
    finally:
        ctx.store.close()
    no_address = sorted(h.hostname for h in hosts if not h.address)
    if common.json_out:
        emit_json({"out": str(out), "jobs": {job: {"targets": len(g), "changed": changed[job]}
                                             for job, g in groups.items()},
                   "without_address": no_address, "lifecycle": str(snapshot) if snapshot else None})
        return
    for job, g in groups.items():
        console.print(f"{esc(job)}: {len(g)} target(s){' (changed)' if changed[job] else ''} -> {esc(out / job)}.json")
    if no_address:
        console.print(f"{len(no_address)} host(s) have no OS address yet (not deployed): {esc(', '.join(no_address))}")
    if snapshot:
        console.print(f"lifecycle snapshot: {esc(snapshot)}")
