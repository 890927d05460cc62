"""A state store is not adopted by mistake, not created where nobody asked, names its damage, reads read-only.

Each test runs the CLI as an operator would (`provision ...` in-process) against a copy of the embedded
site, and checks the exit code and the one error line.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from provision.cli import main
from tests.cli_run import run_cli
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BRINGUP_STATE_DB", "BRINGUP_SITE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "250")


def _site(tmp_path: Path, name: str = "sim", where: str = "sim") -> Path:
    site = copy_sim_site(tmp_path / where)
    if name != "sim":
        site.write_text(site.read_text().replace("name: sim", f"name: {name}", 1))
    return site


def test_another_sites_database_is_refused_unless_adopted(tmp_path: Path) -> None:
    ours, theirs = _site(tmp_path), _site(tmp_path, "second-site", "second")
    db = ours.parent / "state" / "sim.db"
    assert run_cli(main, ["status", "--site", str(ours)])[0] == 0
    code, _, err = run_cli(main, ["status", "--site", str(theirs), "--db", str(db)])
    assert code == 1 and "state store of site 'sim'" in err and "provision db adopt" in err, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM hosts").fetchone()[0] == 17, "nothing of the other site was written"
    assert run_cli(main, ["db", "adopt", "--site", str(theirs), "--db", str(db)])[0] == 0
    assert run_cli(main, ["status", "--site", str(theirs), "--db", str(db)])[0] == 0
    assert run_cli(main, ["status", "--site", str(ours), "--db", str(db)])[0] == 1, "now it is the other site's"


def test_an_sqlite_file_of_another_program_is_refused_and_left_alone(tmp_path: Path) -> None:
    site = _site(tmp_path)
    other = tmp_path / "firefox-places.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    before = other.read_bytes()
    code, _, err = run_cli(main, ["status", "--site", str(site), "--db", str(other)])
    assert code == 1 and "another program" in err and "moz_places" in err, err
    assert other.read_bytes() == before


def test_a_mistyped_db_or_csv_directory_is_an_error_not_a_new_tree(tmp_path: Path) -> None:
    site = _site(tmp_path)
    missing = tmp_path / "nonexistent" / "dir"
    code, _, err = run_cli(main, ["status", "--site", str(site), "--db", str(missing / "x.db")])
    assert code == 1 and "does not exist" in err, err
    code, _, err = run_cli(main, ["harvest-macs", "--site", str(site), "--csv", str(missing / "macs.csv")])
    assert code == 1 and "no such directory" in err and "--csv" in err, err
    assert not (tmp_path / "nonexistent").exists()
    assert run_cli(main, ["status", "--site", str(site)])[0] == 0, "the default state directory is still made"
    assert (site.parent / "state" / "sim.db").is_file()


def _store_with_history(tmp_path: Path) -> tuple[Path, Path]:
    site = _site(tmp_path)
    db = site.parent / "state" / "sim.db"
    assert run_cli(main, ["mark", "gpu-r1-01", "failed", "--reason", "pcie_width_x4", "--site", str(site)])[0] == 0
    return site, db


def test_a_dropped_events_table_is_damage_not_an_empty_history(tmp_path: Path) -> None:
    site, db = _store_with_history(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE events")
    code, out, err = run_cli(main, ["history", "gpu-r1-01", "--site", str(site)])
    assert code == 1 and "damaged" in err and "events" in err and str(db) in err and "db restore" in err, out + err
    assert run_cli(main, ["db", "check", "--site", str(site)])[0] == 2


def test_an_unknown_state_value_is_named_not_an_internal_error(tmp_path: Path) -> None:
    site, db = _store_with_history(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE hosts SET state = 'bogus' WHERE hostname = 'gpu-r1-02'")
    for argv in (["status"], ["history", "gpu-r1-02"], ["mark", "gpu-r1-02", "declared", "--reason", "x"]):
        code, _, err = run_cli(main, [*argv, "--site", str(site)])
        assert code == 1 and "internal error" not in err and "'bogus'" in err and "damaged" in err, (argv, err)


def _corrupt(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 3
    with db.open("r+b") as f:
        for n in range(2, pages):  # every page but the header page: b-tree pages with garbage
            f.seek(n * page + 8)
            f.write(b"\xde\xad\xbe\xef" * 64)


def test_page_corruption_is_found_before_a_write_and_restored_from_a_backup(
        tmp_path: Path) -> None:
    site, db = _store_with_history(tmp_path)
    backup = tmp_path / "good.bak"
    assert run_cli(main, ["db", "backup", "--to", str(backup), "--site", str(site)])[0] == 0
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
    _corrupt(db)
    code, _, err = run_cli(main, ["mark", "gpu-r1-03", "failed", "--reason", "xid_79", "--site", str(site)])
    assert code == 1 and "damaged" in err and str(db) in err and "internal error" not in err, err
    code, out, _ = run_cli(main, ["db", "check", "--site", str(site)])
    assert code == 2 and "db restore" in out
    assert run_cli(main, ["db", "restore", str(backup), "--site", str(site)])[0] == 0
    assert (db.parent / "sim.db.damaged").is_file(), "the damaged file is kept aside"
    assert run_cli(main, ["db", "check", "--site", str(site)])[0] == 0
    code, out, _ = run_cli(main, ["history", "gpu-r1-01", "--site", str(site), "--json"])
    assert code == 0 and "pcie_width_x4" in out


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("unshare") is None, reason="root needs unshare for a ro mount")
def test_a_read_only_database_can_be_read(tmp_path: Path) -> None:
    site, db = _store_with_history(tmp_path)
    state = db.parent
    reads = [f"{sys.executable} -m provision status --site {site}",
             f"{sys.executable} -m provision history gpu-r1-01 --site {site}",
             f"{sys.executable} -m provision mark gpu-r1-01 declared --reason x --site {site}"]
    script = " ; ".join(f"{cmd}; echo rc=$?" for cmd in reads)
    if os.geteuid() == 0:  # root writes through file modes: a read-only bind mount instead
        script = f"mount --bind {state} {state} && mount -o remount,bind,ro {state} && {{ {script}; }}"
        argv = ["unshare", "-m", "sh", "-c", script]
    else:
        for p in state.iterdir():
            p.chmod(0o444)
        state.chmod(0o555)
        argv = ["sh", "-c", script]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.count("rc=0") == 2 and "rc=1" in out.stdout, out.stdout + out.stderr
    assert "pcie_width_x4" in out.stdout and "read-only" in out.stderr, out.stdout + out.stderr
