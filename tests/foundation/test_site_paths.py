"""Every path derived from a site file comes from `provision.site.paths`, and nothing else rebuilds one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from provision.command.context import Context, state_path
from provision.site.index import load_index
from provision.site.loader import load_site
from provision.site.paths import ENV_STATE_DB, SitePaths, cache_dir, resolve_site_path, state_dir
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("provision", "fabric", "tools")
PATHS_MODULE = REPO / "provision" / "site" / "paths.py"
# "state" as a directory of a path being built (`... / "state" / ...`); sysfs's `port / "state"` file is not one
STATE_DIR_IN_A_PATH = re.compile(r"""["']state["']\s*/""")


def test_every_path_of_a_site_lies_in_the_state_directory_beside_its_file(tmp_path: Path) -> None:
    paths = SitePaths.of(tmp_path / "lab.yml", "lab")
    state = tmp_path.resolve() / "state"
    assert paths.state_dir == state == state_dir(tmp_path / "lab.yml")
    assert paths.default_state_db == state / "lab.db"
    assert paths.cache_dir == state / ".site-cache" == cache_dir(tmp_path / "lab.yml")
    assert paths.known_hosts == state / "lab.known_hosts"
    assert paths.ib_diags == state / "lab.ib-diags.json"


def test_the_lab_keeps_its_files_in_the_sites_state_directory_and_announces_its_fabric_tools_there(
        tmp_path: Path) -> None:
    from sim.site_paths import ibsim_state, lab_run_dir

    paths = SitePaths.of(tmp_path / "lab.yml", "lab")
    assert lab_run_dir(paths) == tmp_path.resolve() / "state" / "lab"
    assert ibsim_state(paths) == paths.ib_diags


def test_a_site_directory_means_its_site_yml(tmp_path: Path) -> None:
    assert resolve_site_path(tmp_path) == tmp_path / "site.yml"
    assert SitePaths.of(tmp_path, "x").site_file == (tmp_path / "site.yml").resolve()


def test_the_state_database_is_the_option_else_the_variable_else_the_default(tmp_path: Path) -> None:
    paths = SitePaths.of(tmp_path / "s.yml", "s")
    env = {ENV_STATE_DB: str(tmp_path / "env.db")}
    assert paths.state_db(tmp_path / "given.db", env) == tmp_path / "given.db"
    assert paths.state_db(None, env) == tmp_path / "env.db"
    assert paths.state_db(None, {ENV_STATE_DB: ""}) == paths.default_state_db
    assert paths.state_db(None, {}) == paths.default_state_db


def test_exports_go_beside_the_state_database_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = SitePaths.of(tmp_path / "s.yml", "s")
    monkeypatch.delenv(ENV_STATE_DB, raising=False)
    assert paths.exports()["csv"] == paths.state_dir / "s-macs.csv"
    monkeypatch.setenv(ENV_STATE_DB, str(tmp_path / "elsewhere" / "x.db"))
    assert paths.exports() == {"csv": tmp_path / "elsewhere" / "s-macs.csv",
                               "yaml": tmp_path / "elsewhere" / "s-macs.yaml",
                               "dhcpd": tmp_path / "elsewhere" / "s-dhcpd.conf",
                               "dnsmasq": tmp_path / "elsewhere" / "s-dnsmasq.conf"}


def test_the_site_and_its_index_derive_the_same_paths(tmp_path: Path) -> None:
    site_file = copy_sim_site(tmp_path)
    site, index = load_site(site_file), load_index(site_file)
    assert site.paths == index.paths == SitePaths.of(site_file, "sim")
    assert site.default_state_path() == index.default_state_path() == tmp_path.resolve() / "state" / "sim.db"


def test_the_cli_honours_the_state_db_variable_unless_given_db(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    site_file = copy_sim_site(tmp_path)
    index = load_index(site_file)
    monkeypatch.setenv(ENV_STATE_DB, str(tmp_path / "env.db"))
    assert state_path(index, None) == tmp_path / "env.db"
    assert state_path(index, tmp_path / "given.db") == tmp_path / "given.db"
    ctx = Context.open(site_file, None)
    ctx.store.close()
    assert (tmp_path / "env.db").is_file() and not index.default_state_path().exists()


def test_no_product_module_but_the_paths_module_builds_a_state_directory_path() -> None:
    offenders = []
    for package in PRODUCT_PACKAGES:
        for module in sorted((REPO / package).rglob("*.py")):
            if module == PATHS_MODULE:
                continue
            for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), start=1):
                if STATE_DIR_IN_A_PATH.search(line) or ".site-cache" in line or ".known_hosts\"" in line:
                    offenders.append(f"{module.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_pattern_finds_a_state_directory_and_spares_sysfs_state_files() -> None:
    assert STATE_DIR_IN_A_PATH.search('db = site.directory / "state" / f"{site.name}.db"')
    assert not STATE_DIR_IN_A_PATH.search('text = (port / "state").read_text()')


def test_importing_the_index_does_not_import_the_loader_or_pydantic() -> None:
    probe = ("import sys; import provision.site.index; "
             "print(sorted(m for m in sys.modules if m in {'provision.site.loader', 'provision.site.model', "
             "'pydantic'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == "[]"


def test_the_loader_does_not_import_the_index() -> None:
    source = (REPO / "provision" / "site" / "loader.py").read_text(encoding="utf-8")
    assert "provision.site.index" not in source
