"""What every CLI command starts from: the site (loaded once, validated) and its state store.

The store is opened for its site: a store recording another site is refused (`provision db adopt`
takes one over), and only the site's default state directory is created: a directory named by
`--db` or `$BRINGUP_STATE_DB` that does not exist is a typo, reported as such.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision.errors import BringupError
from provision.site.index import SiteIndex, load_index
from provision.site.store import open_store
from provision.state import StateStore

if TYPE_CHECKING:
    from provision.command.options import Common
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


def require_directories(paths: dict[str, Path | None]) -> None:
    """Refuse output files (`--csv PATH`...) whose directory does not exist: a typo is not a new tree."""
    missing = [f"--{option} {path}" for option, path in paths.items() if path is not None and not path.parent.is_dir()]
    if missing:
        raise BringupError(f"no such directory for {', '.join(missing)}: check the path (only the site's default "
                           f"state directory is created)")


@dataclass
class Context:
    """The site and its store, for every command.

    `index` is the fast view every command has (names, racks, GPUs per host: `provision status` on a
    511-host site must not revalidate it); `site` is the fully validated model, loaded on first use by
    the commands that act on hosts. Both come from the same file: the index exists only for content
    that validated.
    """

    index: SiteIndex
    store: StateStore
    _site: Site | None = field(default=None, repr=False)

    @property
    def site(self) -> Site:
        if self._site is None:
            from provision.site.loader import load_site

            self._site = load_site(self.index.path)
        return self._site

    @classmethod
    def open(cls, site_path: Path | None, db: Path | None, *, adopt: bool = False) -> Context:
        index = load_index(site_path or default_site_path())
        store = open_store(index, db, adopt=adopt)
        store.sync_site((h.hostname, h.rack) for h in index.hosts)
        return cls(index, store)

    @classmethod
    def of(cls, common: Common) -> Context:
        """The context for a command's --site, --db and --adopt-db."""
        return cls.open(common.site, common.db, adopt=common.adopt_db)
