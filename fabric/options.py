"""Options that several `fabric` commands take, declared once (the sub-apps `fabric ports` and `fabric burnin`
use these too). `--site`, `--db` and `--json` are the whole CLI's (`provision/command/options.py`): one meaning in
`provision` and `fabric` alike; `site_path` resolves an omitted `--site` as provision does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision.command.context import default_site_path
from provision.command.options import DbOpt, JsonOpt, SiteOpt, SiteOrNone

__all__ = ["CaptureFormat", "Captures", "CapturesOrNone", "DbOpt", "DesignFile", "DesignFileOrNone", "DesignName",
           "DesignOut", "IbDiags", "JsonOpt", "Live", "LiveTimeout", "NodeNameMapOut", "SiteOpt", "SiteOrNone",
           "UfmSystems", "site_path"]


def site_path(site: Path | None) -> Path:
    """`--site`, else `$BRINGUP_SITE`, else the embedded simulated site (as every provision command)."""
    return site if site is not None else default_site_path()

DESIGN = typer.Option("--design", help="Cabling design file.")
DesignFile = Annotated[Path, DESIGN]
DesignFileOrNone = Annotated[Path | None, DESIGN]
CaptureFormat = Annotated[str, typer.Option(
    "--format", help="auto, ibnetdiscover, ibnetdiscover-p, iblinkinfo, ufm-links.")]
CAPTURES = typer.Option("--discovered", help="Capture(s): ibnetdiscover [-p], iblinkinfo [-l] or UFM links JSON; "
                        "several are merged (one per attachment point).")
Captures = Annotated[list[Path], CAPTURES]
CapturesOrNone = Annotated[list[Path] | None, CAPTURES]
NodeNameMapOut = Annotated[Path | None, typer.Option("--node-name-map", help="Write the OpenSM node-name-map here.")]
DesignOut = Annotated[Path | None, typer.Option("--out", help="Write the design here (default: stdout).")]
DesignName = Annotated[str, typer.Option("--name", help="The fabric's name in the design.")]
Live = Annotated[bool, typer.Option("--live", help="Run ibnetdiscover now (here, or where the site's tools reach the "
                                    "fabric).")]
LiveTimeout = Annotated[float, typer.Option("--timeout", help="Seconds each live discovery may take.")]
IbDiags = Annotated[Path | None, typer.Option("--ib-diags", help="How the fabric's tools are reached (JSON, "
                    "fabric/diags.py; default: $BRINGUP_IB_DIAGS, else the one beside the site file).")]
UfmSystems = Annotated[Path | None, typer.Option("--ufm-systems", help="UFM /resources/systems JSON (node types and "
                       "names for --discovered UFM links JSON).")]
