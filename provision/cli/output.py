"""Output helpers shared by every command: JSON to stdout, tables via rich, errors as one line."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def error_line(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}", markup=True)
