"""The `provision` Typer application; command modules register themselves on `app`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

import typer

from provision.cli.exits import command_app
from provision.cli.option_groups import with_group
from provision.cli.options import DbOpt, JsonOpt, SiteOpt

R = TypeVar("R")

app = command_app("provision",
                  "Take GPU hosts from declared to golden: BMCs, PXE, MAAS, configuration, health, golden set.")



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
