"""Scrub secrets from evidence before it is stored or printed.

Evidence is whatever a command saw (HTTP responses, tool output, a job's command line). Nothing should
put a secret in it, but a BMC can echo a header back and an operator's `--cmd` can carry
`HF_TOKEN=...`, so every key that names a secret is masked on the way in, and so is the value of every
`NAME=value` / `--name value` in text whose name does.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|authorization|api[_-]?key|credential|cookie", re.I)
MASK = "********"
# A name that ends in a secret word: HF_TOKEN, WANDB_API_KEY, DB_PASSWORD, --password (not passes=,
# tokens_per_step=).
_SECRET_WORD = r"[A-Za-z0-9_.-]*?(?:password|passwd|pass|secret|token|api[_-]?key|credentials?)"
# NAME=value (shell assignment, --flag=value), NAME: value, and --flag value; the value ends at a space
# or a quote.
_ASSIGNED = re.compile(rf"(?<![A-Za-z0-9_.-])(?P<name>{_SECRET_WORD})(?P<sep>=|:[ \t]*)(?P<value>[^\s'\"]+)", re.I)
_FLAG = re.compile(rf"(?<![A-Za-z0-9_.-])(?P<name>--{_SECRET_WORD})(?P<sep>[ \t]+)(?P<value>[^\s'\"-][^\s'\"]*)", re.I)
_HEADER = re.compile(
    r"(?P<name>authorization|x-auth-token)(?P<sep>:[ \t]*)(?P<value>(?:(?:bearer|basic|token)[ \t]+)?[^\s'\"]+)", re.I)


def redact_text(text: str) -> str:
    """`text` with the values of secret-named assignments, flags and auth headers masked."""
    for pattern in (_HEADER, _ASSIGNED, _FLAG):
        text = pattern.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    return text


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: MASK if isinstance(key, str) and _SECRET_KEY.search(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
