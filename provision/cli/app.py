"""The `provision` Typer application; command modules register themselves on `app`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from provision.cli.option_groups import with_group
from provision.cli.runner import command_app

R = TypeVar("R")

app = command_app("provision",
                  "Take GPU hosts from declared to golden: BMCs, PXE, MAAS, configuration, health, golden set.")

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


@dataclass(frozen=True)
class Common:
    """--site, --db, --adopt-db and --json: every command that reads a site takes them."""

    site: SiteOpt = None
    db: DbOpt = None
    adopt_db: Annotated[bool, typer.Option(
        "--adopt-db", help="Take over a state database that records another site (it becomes this site's).")] = False
    json_out: JsonOpt = False


def common_options(func: Callable[..., R]) -> Callable[..., R]:
    """The command gets --site, --db, --adopt-db and --json as `common: Common`."""
    return with_group("common", Common)(func)
