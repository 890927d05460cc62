"""Options that several `fabric` commands take, declared once (a sub-app such as `fabric ports` uses these too)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOutput = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
SiteFile = Annotated[Path | None, typer.Option("--site", help="Site file; its `fabric.design` is the design.")]
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
