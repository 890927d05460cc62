"""`fabric ports apply|reenable` errors: one readable line on stderr and exit 1, before anything is changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from tests.sites import copy_sim_site


def test_apply_without_a_fabric_to_discover_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site = copy_sim_site(tmp_path / "sim")
    monkeypatch.setenv("BRINGUP_IB_DIAGS", str(tmp_path / "no-such-fabric.json"))
    assert fabric_main(["ports", "apply", "--site", str(site), "--db", str(tmp_path / "s.db")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the fabric tools' announcement") and "unreadable" in err[0]


def test_reenable_needs_repaired_and_a_known_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = copy_sim_site(tmp_path / "sim")
    assert fabric_main(["ports", "reenable", "leaf-A-r3-U38[5]", "--site", str(site)]) == 1
    assert capsys.readouterr().err.startswith("error: say --repaired")
    assert fabric_main(["ports", "reenable", "leaf-A-r3-U38[5]", "--repaired", "--site", str(site), "--db",
                        str(tmp_path / "s.db")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no link of the port ledger has this end" in err[0]
