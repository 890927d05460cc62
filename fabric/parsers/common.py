"""Helpers shared by the capture parsers: line splitting, GUID normalisation, binary detection."""

from __future__ import annotations

import re

from fabric.errors import ParseError

_HEX = re.compile(r"^[0-9a-f]{1,16}$")


def split_lines(text: str, source: str) -> list[str]:
    """Lines without CR; a lone CR inside a line keeps what a terminal would show (PuTTY logs)."""
    if "\x00" in text:
        lineno = text.count("\n", 0, text.index("\x00")) + 1
        raise ParseError(source, lineno, "binary data (NUL byte): expected text output of an InfiniBand tool")
    if "\r" not in text:
        return text.split("\n")
    out: list[str] = []
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if "\r" in line:
            line = line.rsplit("\r", 1)[1]
        out.append(line)
    return out


def norm_guid(token: str) -> tuple[str, bool]:
    """('0c42a10300a9b026', True) for any spelling of a GUID; (token, False) when it is not hex (redacted)."""
    t = token.strip().lower().removeprefix("0x")
    if _HEX.match(t):
        return t.zfill(16), True
    return token.strip(), False


def printable(line: str, limit: int = 70) -> str:
    shown = line if len(line) <= limit else line[:limit] + "..."
    return shown.encode("ascii", "backslashreplace").decode("ascii")
