"""Scrub secrets from evidence before it is stored or printed.

Evidence is whatever a command saw (HTTP responses, tool output, a job's command line). Nothing should
put a secret in it, but a BMC can echo a header back and an operator's `--cmd` can carry
`HF_TOKEN=...`, so the value under every key whose name is a secret's is masked on the way in, and so
is, in text, the value of every `NAME=value`, `NAME: value`, `"NAME": "value"` and `--name value` whose
name is, of auth and cookie headers, of `curl -u user:pw`, and the password of `scheme://user:pw@host`.

A name is a secret's when one of its words (split at `_ - .` and camelCase) is one: HF_TOKEN,
WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, --password, X-Auth-Token, power_pass; not passed, tokens_per_s,
Bypass or Compass.

A secret a peer sends back unlabelled (a BMC echoing the Basic header in its 401 body) has no name to
go by: every string is also passed through `secret_values.mask`, which masks each secret this process
holds, in each of its encodings.

Tables other packages keep in the state store (the port ledger's evidence and tickets, burn-in history,
Slurm intents) are written with whatever text a peer sent: `masked_writes` is the connection their
transactions get, which masks every held secret in each text it binds (`mask_stored`: a JSON document
stays one, its strings masked, never a number or its syntax). The site loader holds every credential
the site names (`provision.site.named_secrets`), so what is masked is the site's secrets, not only
those this process happened to resolve.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from provision.state.secret_values import mask as mask_held
from provision.state.secret_values import mask_tree

MASK = "********"
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SECRET_WORDS = frozenset({"password", "passwd", "pass", "pwd", "passphrase", "secret", "token", "authorization",
                           "apikey", "credential", "credentials", "cookie"})
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")})

_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;'\"]+)"
_PATTERNS = (
    # Authorization: Bearer x / Cookie: a=b; c=d (to the end of the line or a quote)
    re.compile(r"(?P<name>(?:proxy-)?authorization|x-auth-token|(?:set-)?cookie)(?P<sep>:[ \t]*)(?P<value>[^\r\n\"']+)",
               re.I),
    # "name": "value" (JSON text)
    re.compile(r"(?P<name>\"[^\"\n]{1,100}\")(?P<sep>\s*:\s*)(?P<value>\"(?:[^\"\\\n]|\\.)*\")"),
    # scheme://user:password@host
    re.compile(r"(?P<name>\b[a-z][a-z0-9+.-]*://[^\s/:@]+)(?P<sep>:)(?P<value>[^\s/@]+)(?=@)", re.I),
    # curl -u user:password
    re.compile(r"(?<!\S)(?P<name>-u|--user)(?P<sep>[ \t]+)(?P<value>\S+)"),
    # NAME=value, --name=value, NAME: value
    re.compile(rf"(?<![\w.-])(?P<name>-{{0,2}}[A-Za-z_][\w.-]*)(?P<sep>[ \t]*=[ \t]*|:[ \t]*){_VALUE}"),
    # --name value
    re.compile(rf"(?<![\w.-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>[ \t]+)(?=[^-\s]){_VALUE}"),
)
_ALWAYS = frozenset({"-u", "--user"})


@functools.lru_cache(maxsize=4096)  # evidence repeats the same keys host after host
def is_secret_name(name: str) -> bool:
    words = [w.lower() for w in _WORDS.findall(name)]
    return any(w in _SECRET_WORDS for w in words) or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def _mask(match: re.Match[str]) -> str:
    name = match["name"]
    if "://" not in name and name not in _ALWAYS and not is_secret_name(name.strip('"')):
        return match[0]
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{name}{match['sep']}{quote}{MASK}{quote}"


# Every pattern above needs one of these in the text: one search rules most evidence strings (MACs,
# ids, model names) out before six substitutions would run (a harvest stores ~200 strings per host).
_MAYBE = re.compile(r"pass|pwd|secret|token|auth|key|credential|cookie|://|(?<!\S)-u\b|--user", re.I)


def redact_text(text: str) -> str:
    """`text` with the held secrets and the values of secret-named assignments, flags, auth headers and URL
    passwords masked."""
    text = mask_held(text)
    if not _MAYBE.search(text):
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(_mask, text)
    return text


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (mask_held(key) if isinstance(key, str) else key):
                MASK if isinstance(key, str) and is_secret_name(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def mask_stored(text: str) -> str:
    """`text` with every held secret masked, as it may be stored: a JSON document (a ledger's evidence) has
    its strings masked and is written again, so a secret matching a number never breaks it."""
    masked = mask_held(text)
    if masked == text or text.lstrip()[:1] not in ("[", "{"):
        return masked
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return masked
    cleaned = mask_tree(document)
    return text if cleaned == document else json.dumps(cleaned)


def _bound(parameters: Any) -> Any:
    if isinstance(parameters, Mapping):
        return {k: mask_stored(v) if isinstance(v, str) else v for k, v in parameters.items()}
    if isinstance(parameters, Sequence) and not isinstance(parameters, str | bytes):
        return tuple(mask_stored(v) if isinstance(v, str) else v for v in parameters)
    return parameters


class _MaskingConnection:
    """A connection whose `execute`/`executemany` mask held secrets in every text parameter they bind."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._conn.execute(sql, _bound(parameters))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> sqlite3.Cursor:
        return self._conn.executemany(sql, (_bound(p) for p in seq_of_parameters))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def masked_writes(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`conn` for a transaction writing text from peers: each held secret masked in what it binds."""
    return cast(sqlite3.Connection, _MaskingConnection(conn))
