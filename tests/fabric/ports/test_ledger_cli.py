"""The port ledger's rows, `fabric ports list` and `fabric ports ticket` on a state store."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.cli import main
from fabric.ports.ledger import DISABLED, PLANNED, REENABLED, Ledger, LedgerEnd, LedgerEntry, LedgerError, link_id
from provision.state import StateStore

ENDS = (LedgerEnd("0c42a10300000000", 1, "leaf-A-r3-U40", True, "row A rack r3 U40", "1/1"),
        LedgerEnd("b8599f0300000000", 1, "gpu-r1-01/mlx5_0", False, "row A rack r1 U2"))
EVIDENCE = ({"time": "2026-12-01T11:00:05+00:00", "source": "event.log:2", "kind": "event", "code": 110,
             "text": "[110] Symbol error counter rate threshold exceeded", "condemns": True},)


def _entry(state: str) -> LedgerEntry:
    return LedgerEntry(link_id(ENDS), 0.0, "ops", "fabric ports apply", state, "ufm", "1 counted event(s)", ENDS,
                       EVIDENCE, "", "", None, extra={"design_cable": "C00001", "expected": "4X HDR"})


def test_rows_keep_their_order_and_the_latest_is_current(tmp_path: Path) -> None:
    ledger = Ledger(StateStore(tmp_path / "s.db"))
    ledger.record_many([_entry(PLANNED), _entry(DISABLED)])
    assert link_id(ENDS) == link_id(ENDS[::-1])
    assert [e.state for e in ledger.history()] == [PLANNED, DISABLED]
    assert ledger.find("leaf-A-r3-U40[1]").state == DISABLED
    assert ledger.find("0xb8599f0300000000[1]").extra["design_cable"] == "C00001"
    with pytest.raises(LedgerError):
        ledger.find("spine[9]")
    with pytest.raises(LedgerError):
        ledger.record(_entry("gone"))


def test_list_and_ticket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    ledger = Ledger(StateStore(db))
    ledger.record(_entry(DISABLED))
    assert main(["ports", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "disabled" in out and "leaf-A-r3-U40[1] (row A rack r3 U40)" in out
    assert main(["ports", "ticket", "gpu-r1-01/mlx5_0[1]", "--db", str(db)]) == 0
    ticket = capsys.readouterr().out
    assert "row A rack r1 U2" in ticket and "faceplate 1/1" in ticket and "C00001 (design cable id)" in ticket
    assert "replace the cable" in ticket and "[110]" in ticket and "Design rate: 4X HDR" in ticket
    ledger.record(_entry(REENABLED))
    assert main(["ports", "list", "--db", str(db)]) == 0
    assert "no link is out of service" in capsys.readouterr().out
    assert main(["ports", "ticket", "nothing[1]", "--db", str(db)]) == 1
