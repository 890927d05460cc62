"""Scrub secrets from evidence before it is stored or printed.

Evidence is whatever a command saw (HTTP responses, tool output). Nothing should put a secret in it,
but a BMC can echo a header back, so every key that names a secret is masked on the way in.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|authorization|api[_-]?key|credential|cookie", re.I)
MASK = "********"


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: MASK if isinstance(key, str) and _SECRET_KEY.search(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value
