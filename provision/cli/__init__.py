"""`provision`: the controller's command line."""

from __future__ import annotations

import os
import sys

import click

import provision.cli.bmc_cmds  # noqa: F401
import provision.cli.health_cmds as _health_cmds  # noqa: F401
from provision.cli import lifecycle_cmds, maas_cmds  # noqa: F401  (registers commands)
from provision.cli.app import app
from provision.cli.output import error_line
from provision.errors import BringupError


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error a user can cause becomes one readable message and exit code 1."""
    try:
        # click returns an explicit `typer.Exit(code)` instead of raising it when not standalone
        code = app(args=argv, prog_name="provision", standalone_mode=False)
    except BringupError as exc:
        error_line(str(exc))
        return 1
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        error_line("aborted")
        return 1
    except KeyboardInterrupt:
        error_line("interrupted")
        return 130
    except Exception as exc:
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        error_line(f"internal error: {type(exc).__name__}: {exc} (set BRINGUP_DEBUG=1 for the traceback)")
        return 1
    return code if isinstance(code, int) else 0


def entry() -> None:
    sys.exit(main())


__all__ = ["app", "entry", "main"]
