"""Output helpers shared by every command: JSON to stdout, tables via rich, errors as one line.

rich is imported on first use: `--json` output never pays for it.

rich reads `[...]` in a printed string (a table cell or title too) as markup. Our own styling uses
that; text from anywhere else (BMC and MAAS messages, exception text, host names, endpoints such as
`[fd00::1]:443`, paths, anything an operator typed) goes through `esc` before it is put in a string
rich will parse, so it prints verbatim instead of vanishing or raising `MarkupError`, its control
characters escaped (`provision.state.peer_text.shown`) so a peer cannot drive the terminal. The consoles
also leave `:name:` alone (no emoji codes), which `esc` does not cover.

Every secret the process holds (`provision.state.secret_values`: the credentials it resolved, in
their encodings) is masked on each way out: `esc` (text from outside, before rich folds it across
table lines), `emit_json`, `error_line`, and the consoles' rendered output (whatever else they print).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any

from provision.state.peer_text import shown
from provision.state.secret_values import mask, mask_tree

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment


@cache
def get_console(stderr: bool = False) -> Console:
    """The real rich Console, for APIs that need one (Progress, Live)."""
    return _console(stderr)


@cache
def _console(stderr: bool) -> Console:
    from rich.console import Console

    class MaskingConsole(Console):
        """A Console whose rendered text has the held secrets masked before it is written."""

        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return mask(super()._render_buffer(buffer))

    return MaskingConsole(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)


class _LazyConsole:
    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    def __getattr__(self, name: str) -> Any:
        return getattr(_console(self._stderr), name)


console: Console = _LazyConsole(stderr=False)  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


def emit_json(payload: Any) -> None:
    # masked in each string before JSON escapes them differently, then in the text (what `default=str` made)
    text = json.dumps(mask_tree(payload), indent=2, sort_keys=False, default=str)
    sys.stdout.write(mask(text) + "\n")


def esc(value: object) -> str:
    """`value` as text for a string rich parses as markup, shown verbatim: `[...]` in it is escaped, and
    control characters (ANSI escape sequences, C0/C1, DEL) are shown escaped (`\\x1b`), never interpreted."""
    from rich.markup import escape

    return escape(shown(mask(str(value))))


def error_line(message: str, label: str = "error") -> None:
    """`error: <message>` as one line on stderr, the message verbatim (never parsed as markup): every command's
    error path (`provision.command.exits.run_app`). `label="problems"` for a job that ran and found some (exit 2):
    its summary line is not an error.

    A message of several lines (a site file's problems, one per line) is joined with "; ". Held secrets are
    masked (an exception's text can quote what a peer echoed) and control characters shown escaped, so a
    peer's ANSI sequences are never interpreted. Never raises: it reports errors. When rich cannot print (a
    closed or broken stderr, a character the stream cannot encode) it falls back to a plain write, and failing
    that prints nothing.
    """
    lines = (shown(line).strip() for line in mask(message).split("\n"))
    message = "; ".join(line for line in lines if line)
    try:
        from rich.text import Text

        err_console.print(Text.assemble((f"{label}:", "bold red" if label == "error" else "bold yellow"), " ", message))
    except Exception:
        try:
            sys.stderr.write(f"{label}: {message}\n")
            sys.stderr.flush()
        except Exception:
            pass
