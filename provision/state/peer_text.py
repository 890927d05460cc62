"""Text from peers (BMCs, switches, Slurm, capture files, spreadsheets), made safe to show and to export.

One sanitiser for every way such text reaches an operator:

- `shown`: control characters (C0, DEL, C1; so ESC, which starts ANSI CSI and OSC sequences, and the C1
  CSI/OSC introducers) and the Unicode bidirectional and line-separator controls are shown escaped
  (`\\x1b`, `\\n`, `\\u202e`), never interpreted by a terminal; optionally everything outside ASCII too;
  at most `limit` characters. rich markup is the renderer's concern: `provision.command.output.esc` escapes
  it on top of this, fabric's renderer prints peer text as `rich.text.Text`.
- `csv_cell`: a cell a spreadsheet would read as a formula (`=`, `@`, `+`, `-`, tab, CR first) gets a
  leading single quote (OWASP's rule for CSV injection), for every CSV this project writes.

Both mask every secret the process holds first (`secret_values.mask`: the site's credentials, in their
encodings): a peer's text may quote one, and these are the ways it reaches an operator or a file.

Standard library only: `provision` and `fabric` alike import it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence

from provision.state.secret_values import mask

# C0 (ESC, BEL, BS, CR, LF ...), DEL, C1 (0x9b CSI, 0x9d OSC ...), and the Unicode controls that reorder or
# break what a terminal shows: LRM/RLM, line/paragraph separators, bidi embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NON_ASCII_OR_CONTROL = re.compile("[^\x20-\x7e]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FORMULA_START = ("=", "@", "+", "-", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    o = ord(char)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def shown(text: str, limit: int | None = None, *, ascii_only: bool = False, ellipsis: str = "…") -> str:
    """`text` as a terminal may show it: held secrets masked, control characters escaped, never interpreted
    (`\\x1b[31m` stays those characters), with `ascii_only` every non-ASCII character escaped too; longer
    than `limit`, cut to `limit` characters ending in `ellipsis`."""
    out = (_NON_ASCII_OR_CONTROL if ascii_only else _CONTROL).sub(_escape, mask(text))
    if limit is None or len(out) <= limit:
        return out
    return out[: max(limit - len(ellipsis), 0)] + ellipsis


def csv_cell(value: object) -> str:
    """`value` as a CSV cell no spreadsheet evaluates: one starting like a formula gets a leading `'`."""
    text = "" if value is None else mask(str(value))
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> str:
    """A CSV document (header, then one line per row) whose text cells went through `csv_cell`; numbers
    are written as they are (a negative number is not a formula)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(v) if isinstance(v, str) else v for k, v in row.items()})
    return buf.getvalue()
