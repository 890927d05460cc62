"""The `provision` Typer application; command modules register themselves on `app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="provision",
    help="Take GPU hosts from declared to golden: BMCs, PXE, MAAS, configuration, health, golden set.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

SiteOpt = Annotated[
    Path | None,
    typer.Option("--site", help="Site file or directory (default: $BRINGUP_SITE, else the embedded sim site)."),
]
DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="State database (default: state/<site>.db next to the site file)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
HostsOpt = Annotated[
    str | None,
    typer.Option("--hosts", help="Hosts: globs, ranges (gpu-r1-[01-04]), rack:NAME or @HOSTFILE, comma-separated "
                 "(default: every host the command applies to)."),
]
