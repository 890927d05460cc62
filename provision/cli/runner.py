"""Run a Typer application the project's way: every error becomes one readable line and an exit code."""

from __future__ import annotations

import os

import click
import typer

from provision.cli.output import error_line
from provision.errors import BringupError


def _text(exc: BaseException) -> str:
    """`str(exc)`, or a stand-in when the exception cannot say what it is (its `__str__` raises)."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message could not be read>"


def run_app(app: typer.Typer, argv: list[str] | None, prog_name: str) -> int:
    """Run `app` on `argv`; the exit code it ends with. Reporting an error never raises itself."""
    try:
        # not standalone: click returns an explicit `typer.Exit(code)` instead of calling sys.exit
        code = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except BringupError as exc:
        error_line(_text(exc))
        return 1
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        try:
            exc.show()
        except Exception:
            error_line(_text(exc))
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
        error_line(f"internal error: {type(exc).__name__}: {_text(exc)} (set BRINGUP_DEBUG=1 for the traceback)")
        return 1
    return code if isinstance(code, int) else 0
