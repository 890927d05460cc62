"""Run a project command line in this process as its entry point does (`run_app`: the one exit-code table and
error path), with what it printed: the tests' one in-process runner (a real process only where the test needs one:
a kill, a resource limit, another mount namespace, the argv or memory of the process itself)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import NamedTuple


class CliRun(NamedTuple):
    """What a run gave: `code, out, err = run_cli(...)` or by name."""

    code: int
    stdout: str
    stderr: str


def run_cli(main: Callable[[list[str]], int], argv: list[str]) -> CliRun:
    """`main(argv)` (`fabric.cli.main`, `provision.cli.main`, `training.cli.main`) with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # an argparse program (`training.cli.main`): --help, a usage error
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return CliRun(code, out.getvalue(), err.getvalue())
