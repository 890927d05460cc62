"""`provision`: the controller's command line."""

from __future__ import annotations

import sys

import provision.cli.bmc_cmds  # noqa: F401
import provision.cli.health_cmds as _health_cmds  # noqa: F401
from provision.cli import lifecycle_cmds, maas_cmds  # noqa: F401  (registers commands)
from provision.cli.app import app
from provision.cli.runner import run_app


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error a user can cause becomes one readable message and exit code 1."""
    return run_app(app, argv, "provision")


def entry() -> None:
    sys.exit(main())


__all__ = ["app", "entry", "main"]
