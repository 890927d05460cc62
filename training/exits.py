"""`python -m training`'s exit codes and its one error path: the project's exit-code table (provision/command/exits.py,
ARCHITECTURE.md), kept here by hand because the training package runs on the hosts with the standard library and
torch and imports nothing of provision's (no typer, no rich):

    0    done: the job ran and found nothing wrong
    1    error: the job could not be done (a usage error, a missing or bad file, a refused configuration)
    2    problems: the job ran and found some (`plan`: a budget over the GPU's memory)
    130  interrupted (^C)

An error is one line on stderr, `error: <message>`, never a traceback: lines joined with "; ", control characters
shown escaped, and the secrets the process holds masked (the values of its environment variables and `--env`
pairs whose names say they are secrets, `training.launcher.SECRET_WORDS`). An unexpected exception is an internal
error (BRINGUP_DEBUG=1 lets its traceback through). `train`, the worker torchrun starts, keeps its own codes for
the supervisor too (training/train.py: 2 a configuration the job refuses, 3 the memory plan stopped it), and its
unexpected errors keep their traceback: a rank's log is where a crash mid-training is read, and nobody reruns a
multi-host job with BRINGUP_DEBUG set to see it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

OK, ERROR, PROBLEMS, INTERRUPTED = 0, 1, 2, 130
MASK = "********"
MIN_SECRET = 4  # shorter values are not masked: hiding every "1" would say nothing and garble the line
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")


class UsageError(Exception):
    """A command line argparse refused (an unknown option, a missing or malformed value)."""


def secret_values(environ: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """Values this process holds under a secret's name: environment variables and `KEY=VALUE` arguments
    (`launch --env`), longest first so a secret containing another is masked whole."""
    from training.launcher import SECRET_WORDS

    pairs = [*environ.items(), *(a.partition("=")[::2] for a in argv if "=" in a and not a.startswith("-"))]
    found = {value for name, value in pairs
             if len(value) >= MIN_SECRET and any(word in name.upper() for word in SECRET_WORDS)}
    return sorted(found, key=len, reverse=True)


def one_line(message: str, secrets: Sequence[str] = ()) -> str:
    """`message` as one line: secrets masked, control characters escaped, its lines joined with "; "."""
    for secret in secrets:
        message = message.replace(secret, MASK)
    lines = (_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line).strip() for line in message.splitlines())
    return "; ".join(line for line in lines if line)


def error_line(message: str, argv: Sequence[str] = ()) -> None:
    """Write `error: <message>` as one line on stderr. Never raises: it reports errors."""
    try:
        line = one_line(message, secret_values(os.environ, argv))
    except Exception:
        line = "<an error whose message could not be read>"
    try:
        sys.stderr.write(f"error: {line}\n")
        sys.stderr.flush()
    except Exception:
        pass


def error_exit(message: str) -> int:
    """Report `message` as the one error line; the code a command that could not do its job ends with."""
    error_line(message, sys.argv[1:])
    return ERROR


def _refuse(parser: argparse.ArgumentParser, message: str) -> None:
    raise UsageError(f"{message} (see `{parser.prog} --help`)")


@contextlib.contextmanager
def usage_errors_raise() -> Iterator[None]:
    """While inside, argparse's usage errors raise `UsageError` instead of printing usage and exiting 2.

    The subcommands build their own parsers; this is the one place their errors are worded, without each
    needing a parser class of ours."""
    original = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _refuse  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        argparse.ArgumentParser.error = original  # type: ignore[method-assign]


def run_command(command: Callable[[list[str]], int], argv: list[str], *, tracebacks: bool = False) -> int:
    """Run `command(argv)`; the exit code it ends with (the table above). Reporting an error never raises;
    with `tracebacks` (the worker) an unexpected error propagates, as with BRINGUP_DEBUG=1."""
    try:
        with usage_errors_raise():
            return command(argv)
    except UsageError as exc:
        error_line(str(exc), argv)
    except KeyboardInterrupt:
        error_line("interrupted", argv)
        return INTERRUPTED
    except Exception as exc:
        if _refusal(exc):
            error_line(_text(exc), argv)
        elif tracebacks or os.environ.get("BRINGUP_DEBUG"):
            raise
        else:
            error_line(f"internal error: {type(exc).__name__}: {_text(exc)} (set BRINGUP_DEBUG=1 for the traceback)",
                       argv)
    return ERROR


def _refusal(exc: Exception) -> bool:
    """An error that says the job cannot be done as asked, not a bug: a file not there or unreadable, a value
    refused (an unknown model, a malformed hostfile or site file), the package's own errors (LaunchError,
    FitPlanError, CheckpointRefused)."""
    return isinstance(exc, OSError | ValueError | LookupError) or type(exc).__module__.startswith(("training.", "yaml"))


def _text(exc: BaseException) -> str:
    """The exception's message (a KeyError's without the quotes its str adds), or a stand-in when it has none."""
    try:
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            return f"{exc.filename}: {exc.strerror}"
        if isinstance(exc, FileNotFoundError) and not exc.strerror:  # raised with only the path
            return f"{exc}: no such file or directory"
        if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
            return exc.args[0]
        return str(exc) or type(exc).__name__
    except Exception:
        return f"<{type(exc).__name__} whose message could not be read>"
