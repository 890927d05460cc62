"""Run a Typer application the project's way: one exit-code table and one error path for every command line.

The exit-code table (`provision`, `fabric`, `sim`, the Ansible inventory script; ARCHITECTURE.md and docs/guide.md
say the same; `python -m training` keeps it by hand, training/exits.py):

    code  meaning                                                     raised as
    0     done: the job ran and found nothing wrong                   the command returned
    1     error: the job could not be done (bad input or option,     a BringupError, a usage error, any other
          unreadable site file, another site's database, a peer      click error, an abort (^D), a bug
          unreachable or refusing, a plan refused)
    2     problems: the job ran and found some (failed hosts,        `ProblemsFound`, or `typer.Exit(PROBLEMS)`
          validation findings, failing links, flagged links)         after the command printed its report
    130   interrupted (^C)

A job that ran and found problems ends with its summary as one line on stderr, `problems: <summary>` (exit 2: not
an error; the report above it says what). An error is one readable line on stderr, `error: <message>`
(`provision.command.output.error_line`: the secrets the process holds masked, control characters shown escaped, a
message of several lines joined with "; "), never a traceback: an unexpected exception is reported as an internal
error (BRINGUP_DEBUG=1 lets its traceback through). A usage error (an unknown option, a missing or malformed value)
is the same one line, naming the command's `--help`; a group run bare prints its help and exits 1.

`fabric` imports this module (and with it `provision.cli`'s package, which loads command modules only
on demand): keep it free of the Redfish, MAAS and BMC packages.
"""

from __future__ import annotations

import os

import click
import typer

from provision.command.output import error_line
from provision.errors import BringupError

OK, ERROR, PROBLEMS, INTERRUPTED = 0, 1, 2, 130


class ProblemsFound(BringupError):
    """The job ran and found problems (hosts failed, findings): its message is the summary line, exit 2."""


def _text(exc: BaseException) -> str:
    """`str(exc)`, or a stand-in when the exception cannot say what it is (its `__str__` raises)."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message could not be read>"


def _usage_line(exc: click.UsageError) -> str:
    try:
        message = exc.format_message()
    except Exception:
        message = _text(exc)
    path = exc.ctx.command_path if exc.ctx is not None else None
    return f"{message.rstrip('.')} (see `{path} --help`)" if path else message


def _help(exc: click.UsageError) -> None:
    """A group run bare: its help, as click shows it."""
    try:
        exc.show()
    except Exception:
        error_line(_usage_line(exc))


def run_app(app: typer.Typer, argv: list[str] | None, prog_name: str) -> int:
    """Run `app` on `argv`; the exit code it ends with (the table above). Reporting an error never raises itself."""
    try:
        # not standalone: click returns an explicit `typer.Exit(code)` instead of calling sys.exit
        code = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except ProblemsFound as exc:
        error_line(_text(exc), label="problems")
        return PROBLEMS
    except BringupError as exc:
        error_line(_text(exc))
        return ERROR
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        _help(exc)
        return ERROR
    except click.UsageError as exc:
        error_line(_usage_line(exc))
        return ERROR
    except click.ClickException as exc:
        error_line(_text(exc))
        return ERROR
    except click.exceptions.Abort:
        error_line("aborted")
        return ERROR
    except KeyboardInterrupt:
        error_line("interrupted")
        return INTERRUPTED
    except Exception as exc:
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        error_line(f"internal error: {type(exc).__name__}: {_text(exc)} (set BRINGUP_DEBUG=1 for the traceback)")
        return ERROR
    return code if isinstance(code, int) else OK


def problems_unless(clean: bool) -> None:
    """End a command that printed its report: exit 2 (`PROBLEMS`) unless it found nothing wrong."""
    if not clean:
        raise typer.Exit(PROBLEMS)


def command_app(name: str, help_text: str) -> typer.Typer:
    """A top-level command line of the project: help when run bare, no shell-completion install, and no
    pretty tracebacks (`run_app` turns errors into one line)."""
    return typer.Typer(name=name, help=help_text, no_args_is_help=True, pretty_exceptions_enable=False,
                       add_completion=False)
