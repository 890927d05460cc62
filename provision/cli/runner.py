"""Run a Typer application the project's way: every error becomes one readable line and an exit code.

One mapping from what went wrong to the exit code, for every command line of the project (`provision`,
`fabric`, `sim`); each program only says which code its errors take and how its error line looks:

    what happened                              exit code
    the command returned (or `typer.Exit(n)`)  its code (0 when it returned nothing)
    a BringupError (the user can act on it)    `error`     (provision 1, fabric 2)
    a usage error (bad option, missing value)  click's 2
    another click error, or an abort (^D)      `error`
    interrupted (^C)                           130
    anything else (a bug)                      `error`, or the traceback with BRINGUP_DEBUG=1

`fabric` imports this module (and with it `provision.cli`'s package, which loads command modules only
on demand): keep it free of the Redfish, MAAS and BMC packages.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import click
import typer

from provision.cli.output import error_line
from provision.errors import BringupError

INTERRUPTED = 130


@dataclass(frozen=True)
class ErrorExit:
    """How one program reports a failure: the exit code its errors take and the function writing the line."""

    code: int
    report: Callable[[str], None]


PROVISION_ERRORS = ErrorExit(code=1, report=error_line)


def _text(exc: BaseException) -> str:
    """`str(exc)`, or a stand-in when the exception cannot say what it is (its `__str__` raises)."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message could not be read>"


def _show(exc: click.ClickException, errors: ErrorExit) -> None:
    try:
        exc.show()
    except Exception:
        errors.report(_text(exc))


def run_app(app: typer.Typer, argv: list[str] | None, prog_name: str,
            errors: ErrorExit = PROVISION_ERRORS) -> int:
    """Run `app` on `argv`; the exit code it ends with. Reporting an error never raises itself."""
    try:
        # not standalone: click returns an explicit `typer.Exit(code)` instead of calling sys.exit
        code = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except BringupError as exc:
        errors.report(_text(exc))
        return errors.code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        _show(exc, errors)
        return exc.exit_code
    except click.ClickException as exc:
        _show(exc, errors)
        return errors.code
    except click.exceptions.Abort:
        errors.report("aborted")
        return errors.code
    except KeyboardInterrupt:
        errors.report("interrupted")
        return INTERRUPTED
    except Exception as exc:
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        errors.report(f"internal error: {type(exc).__name__}: {_text(exc)} (set BRINGUP_DEBUG=1 for the traceback)")
        return errors.code
    return code if isinstance(code, int) else 0


def command_app(name: str, help_text: str) -> typer.Typer:
    """A top-level command line of the project: help when run bare, no shell-completion install, and no
    pretty tracebacks (`run_app` turns errors into one line)."""
    return typer.Typer(name=name, help=help_text, no_args_is_help=True, pretty_exceptions_enable=False,
                       add_completion=False)
