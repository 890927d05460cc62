"""Every secret value this process holds, and `mask`, which takes each of them out of any text.

Redaction by name (`redact.py`) masks what is labelled a secret. A peer can send one back unlabelled:
a BMC whose 401 body echoes the request (`Authorization: Basic cm9vdDpwYXNzd29yZA==`), a MAAS that
quotes the OAuth header with its signature. So every secret the process resolves is held here, in the
forms it travels in, and so is every credential the site file names, resolved or not by this command
(`provision.site.named_secrets`, when a site is read: a peer may echo any of them); every string that
leaves (evidence, other packages' tables, CLI output, files, error lines) passes `mask` (`mask_tree` for
a JSON document, so its numbers and syntax stay as they are).

Held forms of a value: the value itself, URL-encoded (`quote` and `quote_plus`), JSON-escaped (as
`json.dumps` writes it, ASCII or not), its `repr` body, HTML-escaped (as Jinja2's autoescape and
`html.escape` write it: the report is HTML), base64 of it, and, for a login, base64 of `user:password`
(HTTP Basic). A MAAS API key is also held as its three parts (consumer key, token
key, token secret): the OAuth header carries them separately, the signature as `%26<token secret>`.

A value shorter than `MIN_LENGTH` is not held: masking every `abc` in the output would say nothing
and destroy the rest (the site validator's business is to refuse such a password, not ours to hide it).
A form shorter than `SUBSTRING_LENGTH` (a 5-letter password such as `other`) is masked only where it
stands as a whole token, not inside a longer run of letters and digits (`another` stays).

Cost: `mask` is on the evidence path (a harvest stores ~200 strings per host, 512 hosts at a time).
With nothing held it returns at once; otherwise a string shorter than the shortest form returns at
once, and a longer one costs one `in` (C substring search) per form, about a dozen.
"""

from __future__ import annotations

import base64
import html
import json
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "********"
MIN_LENGTH = 4
SUBSTRING_LENGTH = 8

_lock = threading.Lock()
_held: set[str] = set()
# What `mask` reads: replaced whole (never mutated) under the lock, so readers need none.
_forms: tuple[str, ...] = ()
_shortest = 0
_short: re.Pattern[str] | None = None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


_MARKUPSAFE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;", '"': "&#34;"})


def forms(value: str, username: str | None = None) -> set[str]:
    """The forms `value` is held in (see the module's docstring)."""
    out = {
        value,
        quote(value, safe=""),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        html.escape(value),
        value.translate(_MARKUPSAFE),  # what Jinja2's autoescape (markupsafe) writes
        _b64(value),
    }
    if username is not None:
        out.add(_b64(f"{username}:{value}"))
    return {form for form in out if len(form) >= MIN_LENGTH}


def _publish() -> None:
    global _forms, _shortest, _short
    ordered = sorted(_held, key=len, reverse=True)  # longest first: a form inside another goes later
    short = [f for f in ordered if len(f) < SUBSTRING_LENGTH]
    _short = re.compile(rf"(?<![A-Za-z0-9])(?:{'|'.join(map(re.escape, short))})(?![A-Za-z0-9])") if short else None
    _forms = tuple(f for f in ordered if len(f) >= SUBSTRING_LENGTH)
    _shortest = min((len(f) for f in ordered), default=0)


def hold(value: str, *, username: str | None = None) -> None:
    """Mask `value` (and its forms) in everything this process writes from now on."""
    if len(value) < MIN_LENGTH:
        return
    new = forms(value, username)
    with _lock:
        if new <= _held:
            return
        _held.update(new)
        _publish()


def hold_maas_key(key: str) -> None:
    """A MAAS API key (`consumer_key:token_key:token_secret`): the whole key and each of its parts."""
    hold(key)
    for part in key.split(":"):
        hold(part)


def mask(text: str) -> str:
    """`text` with every held secret, in each of its forms, replaced by `MASK`."""
    held, short = _forms, _short
    if (not held and short is None) or len(text) < _shortest:
        return text
    for form in held:
        if form in text:
            text = text.replace(form, MASK)
    return short.sub(MASK, text) if short is not None else text


def mask_tree(value: Any) -> Any:
    """`value` with every held secret masked in each string of it, keys included (lists, tuples and dicts
    walked as JSON is; numbers and the structure untouched, so a JSON document stays one)."""
    if not held_count():
        return value
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask_tree(k): mask_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_tree(item) for item in value]
    return value


def held_count() -> int:
    return len(_held)


def forget_all() -> None:
    """Hold nothing (for tests that check what an empty registry does)."""
    with _lock:
        _held.clear()
        _publish()
