"""A validated site's few facts that the lifecycle commands need, without re-validating the site.

`provision status` on a 511-host site must answer in well under half a second. Validating the site
with pydantic costs more than that budget's share, and the site rarely changes, so after a full,
successful validation the loader leaves an index (name, hosts, racks, GPUs per host) beside the
state store, keyed on the site file's content hash. `load_index` uses it when the file is unchanged
and falls back to a full `load_site` (which rewrites it) otherwise: an edited or invalid site is
always fully validated.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class IndexedHost:
    hostname: str
    rack: str
    role: str
    gpus: int


@dataclass(frozen=True)
class SiteIndex:
    name: str
    path: Path
    hosts: tuple[IndexedHost, ...]

    @property
    def directory(self) -> Path:
        return self.path.parent

    def default_state_path(self) -> Path:
        return self.directory / "state" / f"{self.name}.db"

    def host(self, hostname: str) -> IndexedHost | None:
        return next((h for h in self.hosts if h.hostname == hostname), None)


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def cache_dir(site_file: Path) -> Path:
    return site_file.parent / "state" / ".site-cache"


def _index_file(site_file: Path, key: str) -> Path:
    return cache_dir(site_file) / f"{site_file.stem}-{key}.index.json"


def write_index(site_file: Path, key: str, name: str, hosts: list[IndexedHost]) -> None:
    target = _index_file(site_file, key)
    payload: dict[str, Any] = {"name": name, "hosts": [[h.hostname, h.rack, h.role, h.gpus] for h in hosts]}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f"{site_file.stem}-*.index.json"):
            stale.unlink(missing_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        tmp.replace(target)
    except OSError:
        pass  # read-only checkout: every command validates fully, only slower


def resolve_site_path(path: Path) -> Path:
    """A site is a YAML file, or a directory holding `site.yml`."""
    if path.is_dir():
        return path / "site.yml"
    return path


def load_index(path: Path | str) -> SiteIndex:
    file = resolve_site_path(Path(path))
    try:
        key = content_key(file.read_text(encoding="utf-8"))
        data = json.loads(_index_file(file, key).read_text(encoding="utf-8"))
        hosts = tuple(IndexedHost(str(h), str(r), str(role), int(g)) for h, r, role, g in data["hosts"])
        return SiteIndex(name=str(data["name"]), path=file.resolve(), hosts=hosts)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from provision.site.loader import load_site

    site = load_site(file)  # validates fully and writes the index
    return SiteIndex(name=site.name, path=site.path, hosts=tuple(index_hosts(site)))


def index_hosts(site: Any) -> list[IndexedHost]:
    out = []
    for host in site.hosts():
        gpu = site.host_class(host).gpu
        out.append(IndexedHost(host.hostname, host.rack, host.role.value, gpu.count if gpu else 0))
    return out
