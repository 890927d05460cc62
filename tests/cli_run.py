"""Run a project command line in this process as its entry point does (`run_app`: the one exit-code table and
error path), with what it printed: for tests of a sub-app's errors, which only the program reports."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str


def run_cli(main: Callable[[list[str]], int], argv: list[str]) -> CliRun:
    """`main(argv)` (`fabric.cli.main`, `provision.cli.main`) with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return CliRun(code, out.getvalue(), err.getvalue())
