"""Helpers shared by the capture parsers: line splitting, GUID normalisation, binary detection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabric.errors import ParseError
from provision.state.identifiers import canonical_guid
from provision.state.peer_text import shown

if TYPE_CHECKING:
    from fabric.topology import TopologyBuilder


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
    """('0c42a10300a9b026', True) for any spelling of a GUID (`provision.state.identifiers.canonical_guid`);
    (token, False) when it is not one (a capture with its GUIDs redacted): the token is then the node's key."""
    guid = canonical_guid(token)
    return (guid, True) if guid else (token.strip(), False)


def printable(line: str, limit: int = 70) -> str:
    """`line` as printable ASCII (control and non-ASCII characters escaped), cut after `limit` characters."""
    return shown(line, limit + 3, ascii_only=True, ellipsis="...")


class UnreadLines:
    """Lines a parser does not recognise: each one is a warning; the first is kept to say, when nothing at all
    was read, what the input held instead."""

    def __init__(self, builder: TopologyBuilder, what: str) -> None:
        self._builder = builder
        self._what = what  # "iblinkinfo output": the warning says "not iblinkinfo output, ignored: ..."
        self.first: tuple[int, str] | None = None

    def add(self, line: int, text: str) -> None:
        if self.first is None:
            self.first = (line, text)
        self._builder.warn(line, f"not {self._what}, ignored: {printable(text)}")


def nothing_read(source: str, tool: str, expected: str, first_unread: tuple[int, str] | None) -> ParseError:
    """The error for an input none of whose lines was `tool` output: empty, or the first line it held instead."""
    if first_unread is None:
        return ParseError(source, None, f"empty input: expected {tool} output")
    line, text = first_unread
    return ParseError(source, line, f"expected {expected}, found: {printable(text)}")
