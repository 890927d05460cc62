"""Content-keyed caches of a site file: its parsed YAML and the index a full validation leaves.

Both live in the site's cache directory (see `paths.cache_dir`) under names keyed on the hash of the
file's content (`<stem>-<key>.json`, `<stem>-<key>.index.json`), so an edited file never matches a
cache and is parsed and validated again. A cache that cannot be written (a read-only checkout) only
makes every command slower. Cache files are written 0600 (a site file may name who logs in where),
and only for a file that passed validation (see the loader).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.site.paths import cache_dir

PARSED = ".json"
INDEX = ".index.json"
_KEY_CHARS = 24


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_KEY_CHARS]


def _cache_file(site_file: Path, key: str, kind: str) -> Path:
    return cache_dir(site_file) / f"{site_file.stem}-{key}{kind}"


def _is_cache_of(name: str, stem: str, kind: str) -> bool:
    """`site-<key>.json` is the parsed cache of `site`; `site-<key>.index.json` is not (its key has a dot)."""
    key = name[len(stem) + 1: -len(kind)]
    return name.startswith(f"{stem}-") and name.endswith(kind) and len(key) == _KEY_CHARS and key.isalnum()


def read_cached(site_file: Path, key: str, kind: str) -> Any:
    """The cached JSON of `kind` for content `key`; raises OSError or ValueError when there is none."""
    from provision.site.bounded import MAX_CACHE_BYTES, InputRefused, read_text  # not yaml on the index's path

    try:
        text = read_text(_cache_file(site_file, key, kind), limit=MAX_CACHE_BYTES, what="site cache")
    except InputRefused as exc:  # not a cache this code wrote: there is none, validate again
        raise ValueError(str(exc)) from None
    return json.loads(text)


def write_cached(site_file: Path, key: str, kind: str, blob: str) -> None:
    """Replace this file's cache of `kind` with `blob` (atomically; older keys are removed)."""
    target = _cache_file(site_file, key, kind)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f"{site_file.stem}-*{kind}"):
            if _is_cache_of(stale.name, site_file.stem, kind):
                stale.unlink(missing_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(blob)
        tmp.replace(target)
    except OSError:
        pass  # read-only checkout: every command parses and validates fully, only slower


def drop_cached(site_file: Path, key: str, kind: str) -> None:
    """Remove the cache of `kind` for content `key`, if there is one."""
    with contextlib.suppress(OSError):
        _cache_file(site_file, key, kind).unlink(missing_ok=True)


@dataclass(frozen=True)
class IndexedHost:
    hostname: str
    rack: str
    role: str
    gpus: int


def index_hosts(site: Any) -> list[IndexedHost]:
    """The index entries of a validated `Site` (typed loosely: this module never imports the model)."""
    out = []
    for host in site.hosts():
        gpu = site.host_class(host).gpu
        out.append(IndexedHost(host.hostname, host.rack, host.role.value, gpu.count if gpu else 0))
    return out


def write_index(site_file: Path, key: str, name: str, hosts: list[IndexedHost]) -> None:
    payload: dict[str, Any] = {"name": name, "hosts": [[h.hostname, h.rack, h.role, h.gpus] for h in hosts]}
    write_cached(site_file, key, INDEX, json.dumps(payload))


def read_index(site_file: Path, key: str) -> tuple[str, tuple[IndexedHost, ...]] | None:
    """(site name, hosts) from the index left for content `key`; None when there is none or it is unreadable."""
    try:
        data = read_cached(site_file, key, INDEX)
        hosts = tuple(IndexedHost(str(h), str(r), str(role), int(g)) for h, r, role, g in data["hosts"])
        return str(data["name"]), hosts
    except (OSError, ValueError, KeyError, TypeError):
        return None
