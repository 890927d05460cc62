"""fabric burnin opens the state store as every command does (issue #39): another site's database is refused
in one line, never written with burn-in history."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.burnin.actions import open_site
from fabric.cli import main as fabric_main
from fabric.errors import FabricError
from provision.state import StateStore
from provision.state.opening import SiteIdentity
from tests.cli_run import run_cli
from tests.fabric.conftest import REPO

SITE = REPO / "inventory" / "sim" / "site.yml"


def test_another_sites_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    StateStore(db, site=SiteIdentity.of("elsewhere", tmp_path / "elsewhere.yml")).close()
    with pytest.raises(FabricError, match="elsewhere"):
        open_site(SITE, db)
    result = run_cli(fabric_main, ["burnin", "judge", "--site", str(SITE), "--db", str(db)])
    assert result.code == 1 and result.stderr.count("\n") == 1 and "elsewhere" in result.stderr


def test_a_database_in_a_directory_that_does_not_exist_is_refused_not_created(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "state.db"
    with pytest.raises(FabricError):
        open_site(SITE, db)
    assert not (tmp_path / "typo").exists()
