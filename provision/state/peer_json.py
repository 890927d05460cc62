"""JSON from peers (UFM, BMCs, MAAS, Slurm), decoded with its nesting bounded.

`json.loads` recurses once per level: an answer nested 200,000 lists deep ends in `RecursionError`, and
one a few hundred deep decodes but then breaks whatever walks it recursively (redaction, rendering).
`loads` measures the nesting before decoding and refuses anything deeper than `max_depth` (no answer of
these peers nests past a dozen levels) with `JsonTooDeep`, a `BringupError` (one line, exit 1, where
no client maps it) and a `json.JSONDecodeError` (so each client's own `except` turns it into its
package's protocol error, as it does for any other answer that is not the JSON it expects).

The measure is linear in the text and runs at C speed, on the UTF-8 bytes: escaped `\\` and `\"` dropped,
then everything but brackets and quotes, then every `""` (a string without brackets inside: removing two
adjacent quotes keeps every other quote's parity), then the brackets between the remaining quote pairs;
the running sum of +1/-1 bytes over what is left is the depth. Fewer opening brackets than the limit
cannot nest past it: such an answer (most) is not measured.

Standard library only (it sits in `provision.state`, which every client package may import).
"""

from __future__ import annotations

import json
from array import array
from itertools import accumulate
from typing import Any

from provision.errors import BringupError

MAX_DEPTH = 100
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')  # what `bytes.translate` deletes
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as signed bytes: +1, -1


class JsonTooDeep(BringupError, json.JSONDecodeError):
    """A peer's JSON nested deeper than the bound: refused before it is decoded."""

    def __init__(self, what: str, max_depth: int, doc: str) -> None:
        json.JSONDecodeError.__init__(self, f"JSON nested deeper than {max_depth} levels", "", 0)
        self.what = what
        self.max_depth = max_depth
        self.size = len(doc)

    def __str__(self) -> str:
        return f"{self.what}: {self.msg}, refused"

    def __reduce__(self) -> tuple[Any, ...]:
        return BringupError, (str(self),)


def depth(text: str) -> int:
    """How deep the brackets of `text` nest, strings aside (for JSON text: its nesting depth)."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:  # escape pairs out: `\\` first (a run pairs from its left), then `\"`
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # the odd parts are inside strings
    return max(0, max(accumulate(array("b", data.translate(_STEPS))), default=0))


def _text(raw: str | bytes | bytearray) -> str:
    if isinstance(raw, str):
        return raw
    # what json.loads does with bytes: the encoding from the first bytes (UTF-8, -16 or -32)
    return bytes(raw).decode(json.detect_encoding(raw), "surrogatepass")


def loads(raw: str | bytes | bytearray, *, what: str = "answer", max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(raw)`, or `JsonTooDeep` when it nests deeper than `max_depth` (measured first). Other
    malformed JSON raises `json.JSONDecodeError` (bytes that do not decode: `UnicodeDecodeError`), as
    `json.loads` does."""
    text = _text(raw)
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise JsonTooDeep(what, max_depth, text)
    try:
        return json.loads(text)
    except RecursionError:  # a deep stack at the call site: still the answer's nesting, still refused
        raise JsonTooDeep(what, max_depth, text) from None
