"""The `provision` Typer application; command modules register themselves on `app`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from provision.cli.option_groups import with_group
from provision.command.exits import command_app
from provision.command.options import Common

R = TypeVar("R")

app = command_app("provision",
                  "Take GPU hosts from declared to golden: BMCs, PXE, MAAS, configuration, health, golden set.")



def common_options(func: Callable[..., R]) -> Callable[..., R]:
    """The command gets --site, --db, --adopt-db and --json as `common: Common`."""
    return with_group("common", Common)(func)
