"""What every CLI command starts from: the site (loaded once, validated) and its state store."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provision.site.index import SiteIndex, load_index
from provision.state import StateStore

if TYPE_CHECKING:
    from provision.site.model import Site

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDDED_SITE = REPO_ROOT / "inventory" / "sim" / "site.yml"


def default_site_path() -> Path:
    """`$BRINGUP_SITE` when set, else the embedded simulated site."""
    env = os.environ.get("BRINGUP_SITE")
    return Path(env) if env else EMBEDDED_SITE


def state_path(site: Site | SiteIndex, override: Path | None) -> Path:
    """`--db` > `$BRINGUP_STATE_DB` > `state/<site>.db` beside the site file."""
    return site.paths.state_db(override)


@dataclass
class Context:
    """The fully validated site and its store, for commands that act on hosts."""

    site: Site
    store: StateStore

    @classmethod
    def open(cls, site_path: Path | None, db: Path | None) -> Context:
        from provision.site.loader import load_site

        site = load_site(site_path or default_site_path())
        store = StateStore(state_path(site, db))
        store.sync_site((h.hostname, h.rack) for h in site.hosts())
        return cls(site, store)


@dataclass
class IndexContext:
    """The site's index and its store, for commands that only read or record lifecycle state."""

    site: SiteIndex
    store: StateStore

    @classmethod
    def open(cls, site_path: Path | None, db: Path | None) -> IndexContext:
        index = load_index(site_path or default_site_path())
        store = StateStore(state_path(index, db))
        store.sync_site((h.hostname, h.rack) for h in index.hosts)
        return cls(index, store)
