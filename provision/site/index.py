"""A validated site's few facts that the lifecycle commands need, without re-validating the site.

`provision status` on a 511-host site must answer in well under half a second. Validating the site
with pydantic costs more than that budget's share, and the site rarely changes, so after a full,
successful validation the loader leaves an index (name, hosts, racks, GPUs per host) in the site's
cache directory, keyed on the site file's content hash (see `cache.py`). `load_index` uses it when
the file is unchanged and falls back to a full `load_site` (which rewrites it) otherwise: an edited or
invalid site is always fully validated.

Only that fallback imports the loader (and pydantic with it); the loader never imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from provision.site.bounded import MAX_SITE_BYTES, InputRefused, read_text
from provision.site.cache import IndexedHost, content_key, index_hosts, read_index
from provision.site.named_secrets import hold_site_file_secrets
from provision.site.paths import SitePaths, resolve_site_path


@dataclass(frozen=True)
class SiteIndex:
    name: str
    path: Path
    hosts: tuple[IndexedHost, ...]

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def paths(self) -> SitePaths:
        return SitePaths(self.path, self.name)

    def default_state_path(self) -> Path:
        return self.paths.default_state_db

    def host(self, hostname: str) -> IndexedHost | None:
        return next((h for h in self.hosts if h.hostname == hostname), None)


def load_index(path: Path | str) -> SiteIndex:
    file = resolve_site_path(path)
    try:
        indexed = read_index(file, content_key(read_text(file, limit=MAX_SITE_BYTES, what="site file")))
    except (OSError, UnicodeDecodeError, InputRefused):
        indexed = None  # the loader reports an unreadable file with its own message
    if indexed is not None:
        name, hosts = indexed
        hold_site_file_secrets(file)  # every credential it names is masked in what we print (load_site does too)
        return SiteIndex(name=name, path=file.resolve(), hosts=hosts)
    from provision.site.loader import load_site

    site = load_site(file)  # validates fully and writes the index
    return SiteIndex(name=site.name, path=site.path, hosts=tuple(index_hosts(site)))


__all__ = ["IndexedHost", "SiteIndex", "load_index"]
