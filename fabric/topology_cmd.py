"""`fabric topology`: Slurm's topology.conf, or a rank order grouped by leaf, from the fabric as built.

`--format slurm` writes topology.conf(5) for TopologyPlugin=topology/tree; `--format rank-order` one host per
line, hosts sharing a leaf side by side (a hostfile for `python -m training launch --hostfile`). The fabric
is read as `fabric validate` reads it (`--discovered FILE` or `--live`); `--site` gives the host names (its
GPU hosts), the design (switch names) and the state store, whose port ledger and burn-in verdicts take links
out. Warnings (a leaf left an island, hosts not written) go to stderr; errors are one line, exit 1
(provision/command/exits.py).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from fabric import render
from fabric.options import (
    CapturesOrNone,
    DbOpt,
    DesignFileOrNone,
    IbDiags,
    JsonOpt,
    Live,
    LiveTimeout,
    SiteOrNone,
    UfmSystems,
)
from fabric.pipeline import Inputs
from fabric.slurm_topology import SlurmTopology, rank_order_text, to_json, topology_conf
from fabric.topology_inputs import escape
from fabric.topology_load import TopologyRequest, load_slurm_topology


class TopologyFormat(StrEnum):
    slurm = "slurm"
    rank_order = "rank-order"


def topology_command(
    fmt: Annotated[TopologyFormat, typer.Option("--format", help="slurm: topology.conf; rank-order: one host "
                                                "per line, grouped by leaf.")] = TopologyFormat.slurm,
    site: SiteOrNone = None,
    design: DesignFileOrNone = None,
    discovered: CapturesOrNone = None,
    live: Live = False,
    timeout: LiveTimeout = 60.0,
    ib_diags: IbDiags = None,
    capture_format: Annotated[str, typer.Option("--capture-format", help="auto, ibnetdiscover, ibnetdiscover-p, "
                                                "iblinkinfo, ufm-links.")] = "auto",
    ufm_systems: UfmSystems = None,
    db: DbOpt = None,
    hosts: Annotated[str | None, typer.Option("--hosts", help="Only hosts matching this glob.")] = None,
    output: Annotated[Path | None, typer.Option("--output", help="Write the text here (default: stdout).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Slurm topology.conf (tree) or a leaf-grouped rank order from the as-built fabric."""
    fabric = Inputs(site=site, design=design, discovered=tuple(discovered or ()), live=live, timeout=timeout,
                    ib_diags=ib_diags, fmt=capture_format, ufm_systems=ufm_systems)
    req = TopologyRequest(fabric, db=db, hosts=hosts)
    result = load_slurm_topology(req, warn=lambda w: render.warning_line(escape(w, 400, quotes=False)))
    _show(result, fmt, output, as_json)


def _show(t: SlurmTopology, fmt: TopologyFormat, output: Path | None, as_json: bool) -> None:
    text = topology_conf(t) if fmt is TopologyFormat.slurm else rank_order_text(t)
    for warning in t.warnings:
        render.warning_line(escape(warning, 400, quotes=False))
    if output is not None:
        render.write_file(output, text)
    if as_json:
        render.emit_json({"format": fmt.value, "output": str(output) if output else None, **to_json(t),
                          "text": text})
    elif output is not None:
        leaves = sum(1 for s in t.switches if s.level == 0)
        sys.stdout.write(f"wrote {output}: {len(t.hosts)} hosts, {leaves} leaf switches, "
                         f"{len(t.switches) - leaves} above them, {len(t.islands)} island(s), "
                         f"{len(t.excluded)} link(s) left out\n")
    else:
        sys.stdout.write(text)
