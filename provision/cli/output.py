"""Output helpers shared by every command: JSON to stdout, tables via rich, errors as one line.

rich is imported on first use: `--json` output never pays for it.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@cache
def get_console(stderr: bool = False) -> Console:
    """The real rich Console, for APIs that need one (Progress, Live)."""
    return _console(stderr)


@cache
def _console(stderr: bool) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


class _LazyConsole:
    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    def __getattr__(self, name: str) -> Any:
        return getattr(_console(self._stderr), name)


console: Console = _LazyConsole(stderr=False)  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def error_line(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}", markup=True)
