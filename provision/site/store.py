"""The one way any command opens the state store.

A store is opened for its site: a store recording another site is refused (`provision db adopt` takes one
over), and only the site's default state directory is created: a directory named by `--db` or
`$BRINGUP_STATE_DB` that does not exist is a typo, reported as such. tests/foundation/test_store_opener.py
fails if product code constructs the store any other way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provision.errors import BringupError
from provision.state import StateStore
from provision.state.opening import SiteIdentity

if TYPE_CHECKING:
    from provision.site.index import SiteIndex
    from provision.site.model import Site


def open_store(site: Site | SiteIndex, db: Path | None, *, adopt: bool = False) -> StateStore:
    """The site's state store (`--db` > `$BRINGUP_STATE_DB` > default), checked to be this site's."""
    path = site.paths.state_db(db)
    identity = SiteIdentity.of(site.name, site.path)
    return StateStore(path, site=identity, adopt=adopt, create_directory=path == site.paths.default_state_db)


def open_store_at(db: Path) -> StateStore:
    """A store named by path alone (a command given `--db` or `$BRINGUP_STATE_DB` without a site): it must
    exist already; nothing is created and no site identity is recorded in it."""
    if not db.is_file():
        raise BringupError(f"no state database at {db}: check the path (only a site's default store is created)")
    return StateStore(db, create_directory=False)
