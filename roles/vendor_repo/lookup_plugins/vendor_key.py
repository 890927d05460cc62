"""`lookup('vendor_key', URL, cache=PATH)`: a vendor's apt signing key, downloaded by the controller once for a run.

Every host that lacks the key gets it from the controller (the hosts need no route to the vendor's key URL, and
400 hosts cost one download, not 400). Each host's worker calls the lookup; the first one downloads under an
exclusive lock on the cache directory and keeps the key at PATH, the others wait for the lock and read it. A copy
younger than `max_age` seconds is used as it is. The key's fingerprint is not trusted here: each host checks it
against the site's pin (roles/vendor_repo/tasks/apply.yml). The answer is bounded in size and time (the key
server is a peer like any other).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleLookupError  # type: ignore[import-untyped]
from ansible.module_utils.urls import open_url  # type: ignore[import-untyped]
from ansible.plugins.lookup import LookupBase  # type: ignore[import-untyped]

DOCUMENTATION = """
name: vendor_key
short_description: A vendor's apt signing key, downloaded once by the controller and cached
description:
  - Returns the key's text; downloads it to the cache path unless a copy younger than max_age is there.
options:
  _terms:
    description: The key's URL (one).
    required: true
  cache:
    description: Where the controller keeps the key (its directory is created 0755).
    required: true
  max_age:
    description: Seconds a cached copy is used without downloading it again.
    default: 3600
  timeout:
    description: Seconds for the whole download.
    default: 30
"""

# An armored OpenPGP public key is a few KiB; a vendor keyring with several keys stays far below this.
MAX_KEY_BYTES = 1 << 20


def _download(url: str, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    try:
        response = open_url(url, timeout=timeout, follow_redirects="safe")
    except Exception as exc:  # open_url raises urllib's and ansible's own errors
        raise AnsibleLookupError(f"{url}: {exc}") from exc
    with response:
        chunks, size = [], 0
        while chunk := response.read(65536):
            size += len(chunk)
            if size > MAX_KEY_BYTES:
                raise AnsibleLookupError(f"{url}: answer larger than {MAX_KEY_BYTES} bytes, not a signing key")
            if time.monotonic() > deadline:
                raise AnsibleLookupError(f"{url}: no complete answer within {timeout:g} s")
            chunks.append(chunk)
    data = b"".join(chunks)
    if not data.strip():
        raise AnsibleLookupError(f"{url}: empty answer")
    return data


def fetch(url: str, cache: Path, max_age: float, timeout: float) -> str:
    cache.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    with (cache.parent / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if cache.exists() and time.time() - cache.stat().st_mtime < max_age:
                return cache.read_text(encoding="ascii", errors="replace")
            data = _download(url, timeout)
            partial = cache.with_name(f".{cache.name}.{os.getpid()}")
            partial.write_bytes(data)
            partial.chmod(0o644)
            partial.replace(cache)
            return data.decode("ascii", errors="replace")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class LookupModule(LookupBase):  # type: ignore[misc]
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError(f"vendor_key: one key URL, not {len(terms)}")
        return [fetch(str(terms[0]), Path(str(self.get_option("cache"))), float(self.get_option("max_age")),
                      float(self.get_option("timeout")))]
