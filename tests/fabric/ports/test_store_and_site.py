"""`fabric ports` opens the state store as every command does, and takes its UFM job deadline from the site.

- Another site's database is refused by each ports command, before anything is read or written (issue 39:
  the ledger used to be written into whatever database `--db` named), and a mistyped `--db` directory is an
  error, not a new tree.
- `fabric.ufm.job_timeout_s` (validated, default 120 s) is how long a UFM job may run; `--job-timeout` wins.
- `fabric ports list` shows a link whose latest row is an intent as in flight.
- One acting run per store: while another holds the site's ports lock, `apply --apply` is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from fabric.ports.ledger import PLANNED, Ledger, LedgerEnd, LedgerEntry, link_id
from fabric.ports.site_run import open_ports_site, ports_lock, ufm_client
from provision.site import load_site
from provision.site.loader import SiteError
from provision.site.store import open_store
from tests.sites import copy_sim_site

ENDS = (LedgerEnd("0c42a10300000010", 5, "leaf-A-r3-U38", True, "row A rack r3 U38"),
        LedgerEnd("b8599f0300000210", 1, "gpu-r1-05/mlx5_1", False, "row A rack r1 U5"))
UFM_LINE = 'ufm: {url: "https://127.0.2.2:8443/", credential: ufm-admin, verify_tls: false}'


@pytest.fixture()
def sites(tmp_path: Path) -> tuple[Path, Path, Path]:
    """This site, another site (same name, another directory: another site id) and the other's database."""
    ours, theirs = copy_sim_site(tmp_path / "ours"), copy_sim_site(tmp_path / "theirs")
    other_db = tmp_path / "theirs" / "theirs.db"
    with open_store(load_site(theirs), other_db) as store:
        Ledger(store).record(LedgerEntry(link_id(ENDS), 0.0, "ops", "fabric ports apply", PLANNED, "ufm",
                                         "1 counted event(s)", ENDS))
    return ours, theirs, other_db


@pytest.mark.parametrize("command", [["list"], ["ticket", "leaf-A-r3-U38[5]"], ["apply"],
                                     ["reenable", "leaf-A-r3-U38[5]", "--repaired"]])
def test_another_sites_database_is_refused_by_every_ports_command(
        command: list[str], sites: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    ours, _theirs, other_db = sites
    before = other_db.read_bytes()
    assert fabric_main(["ports", *command, "--site", str(ours), "--db", str(other_db)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{other_db} is the state store of site" in err[0] and "provision db adopt" in err[0]
    assert other_db.read_bytes() == before


@pytest.mark.parametrize("command", [["list"], ["apply"], ["reenable", "leaf-A-r3-U38[5]", "--repaired"]])
def test_a_mistyped_db_directory_is_an_error_not_a_new_directory(
        command: list[str], sites: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = sites[0]
    typo = tmp_path / "stat" / "site.db"
    assert fabric_main(["ports", *command, "--site", str(ours), "--db", str(typo)]) == 1
    err = capsys.readouterr().err
    assert str(typo.parent) in err and not typo.parent.exists()


def test_list_shows_a_link_in_flight(sites: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _ours, theirs, other_db = sites
    assert fabric_main(["ports", "list", "--site", str(theirs), "--db", str(other_db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("planned") and "in flight: a run is changing this link or was cut short" in out


def test_the_ufm_job_deadline_comes_from_the_site_unless_the_option_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_SIM_UFM_PASSWORD", "unused-here")
    site = copy_sim_site(tmp_path / "sim")
    default = open_ports_site(site, tmp_path / "a.db")
    assert default.site.spec.fabric is not None and default.site.spec.fabric.ufm is not None
    client = ufm_client(default)
    assert client is not None and client.job_timeout_s == 120.0
    default.close()
    text = site.read_text()
    site.write_text(text.replace(UFM_LINE, UFM_LINE[:-1] + ", job_timeout_s: 7}"))
    ps = open_ports_site(site, tmp_path / "b.db")
    try:
        assert (site_client := ufm_client(ps)) is not None and site_client.job_timeout_s == 7.0
        assert (given := ufm_client(ps, 3.0)) is not None and given.job_timeout_s == 3.0
    finally:
        ps.close()
    for bad in ("0", "-5", "7200", "soon"):
        site.write_text(text.replace(UFM_LINE, UFM_LINE[:-1] + f", job_timeout_s: {bad}}}"))
        with pytest.raises(SiteError, match="job_timeout_s"):
            load_site(site)


def test_an_acting_run_is_refused_while_another_holds_the_ports_lock(
        sites: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = sites[0]
    db = tmp_path / "ours.db"
    ps = open_ports_site(ours, db)
    try:
        with ports_lock(ps):
            assert fabric_main(["ports", "apply", "--apply", "--site", str(ours), "--db", str(db)]) == 1
            err = capsys.readouterr().err
            assert "another `fabric ports` run is changing this site's ports" in err
    finally:
        ps.close()
