"""A UFM whose event texts echo the site's credentials leaves no copy of one in the port ledger, its tickets,
`fabric ports list --json` or `fabric ports ticket` (issue 38): neither the UFM login `fabric ports apply`
resolves, nor the BMC password it never needs, which the site also names. And a state database that already
holds an echoed credential (a row an older bringup wrote) is shown masked, by the report too.

The UFM stand-in is tests/fabric/ports/fakeufm.py (UFM's REST shapes: events, ports, actions, jobs); its
events are the 6.24 schema of GET /ufmRest/app/events (sim/ufm/fabricview.py, realdata/3_ufm), with the
credentials in `name` and `description` as a UFM quoting a failed login would put them.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from fabric.design import load_design
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.ledger import Ledger
from provision.cli import main as provision_main
from provision.state import StateStore, secret_values
from sim.ibfabric import IbFabric
from sim.ufm.fabricview import SimEvent
from tests.fabric.ports.fakeufm import UfmState, fake_ufm
from tests.sites import copy_sim_site

pytestmark = pytest.mark.tools("ibsim", "opensm")
REPO = Path(__file__).resolve().parents[2]
UFM_PASSWORD = "Ufm-echo-S3cret-77"
BMC_PASSWORD = "Bmc-never-resolved-91"  # the site names it; `fabric ports` never resolves it
LEAF, SPINE = "0c42a10300000000", "0c42a10300000080"


def _forms() -> dict[str, bytes]:
    return {"ufm password": UFM_PASSWORD.encode(), "bmc password": BMC_PASSWORD.encode(),
            "ufm basic": base64.b64encode(f"admin:{UFM_PASSWORD}".encode()),
            "bmc basic": base64.b64encode(f"root:{BMC_PASSWORD}".encode())}


def _leaks(where: str, blob: bytes) -> list[str]:
    return [f"{where}: {name}" for name, form in _forms().items() if form in blob]


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IbFabric, Path]]:
    state = tmp_path_factory.mktemp("ib") / "ibfabric.json"
    with IbFabric(load_design(REPO / "inventory" / "sim" / "fabric" / "design.yml"), state_file=state) as f:
        yield f, state


def _echoing_events(discovered: str) -> list[dict[str, object]]:
    top = parse_ibnetdiscover(discovered)
    port, far = next((p, far) for p, far in top.adjacency[LEAF] if far.guid == SPINE)
    echo = (f"login admin/{UFM_PASSWORD} failed; tried root:{BMC_PASSWORD} "
            f"(Authorization: Basic {base64.b64encode(f'root:{BMC_PASSWORD}'.encode()).decode()})")
    return [SimEvent(i, 329, f"Link went down {echo}", "Link", f"{LEAF}_{port}:{SPINE}_{far.port}",
                     f"default(1) / Link: Source {LEAF}_{port}  TO Dest: {SPINE}_{far.port}",
                     "Warning", "Fabric_Topology", f"Link went down: {echo}").to_rest() for i in range(1, 41)]


def _env(state_file: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")},
            "BRINGUP_SIM_UFM_PASSWORD": UFM_PASSWORD, "BRINGUP_SIM_BMC_PASSWORD": BMC_PASSWORD,
            "BRINGUP_IB_DIAGS": str(state_file)}


def _fabric(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from fabric.cli import main; sys.exit(main())", *argv],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_credentials_a_ufm_echoes_in_its_events_reach_no_ledger_row_ticket_or_listing(
        fabric: tuple[IbFabric, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ib, state_file = fabric
    site = copy_sim_site(tmp_path / "sim")
    ufm = UfmState("admin", UFM_PASSWORD, events=_echoing_events(ib.discover()))
    db = tmp_path / "state.db"
    with fake_ufm(ufm) as url:
        site.write_text(site.read_text().replace("https://127.0.2.2:8443/", url + "/"))
        applied = _fabric(["ports", "apply", "--site", str(site), "--db", str(db), "--apply", "--tickets"],
                          _env(state_file))
    assert applied.returncode == 0 and "disabled         0x" in applied.stdout, applied.stdout + applied.stderr
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert b"port_ledger" in stored
    leaks = _leaks("state db", stored) + _leaks("apply", (applied.stdout + applied.stderr).encode())
    # list and ticket in this process, which resolves no credential: the site's are masked all the same
    for name, value in _env(state_file).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert fabric_main(["ports", "list", "--json", "--site", str(site), "--db", str(db)]) == 0
    listed = capsys.readouterr()
    rows = json.loads(listed.out)
    assert rows and rows[0]["evidence"], listed
    assert any("********" in str(e) for e in rows[0]["evidence"]), "the echoing events are the link's evidence"
    assert fabric_main(["ports", "ticket", rows[0]["link"], "--site", str(site), "--db", str(db)]) == 0
    ticket = capsys.readouterr()
    assert "Evidence:" in ticket.out, ticket
    leaks += _leaks("list --json", (listed.out + listed.err).encode()) + _leaks("ticket", (ticket.out + ticket.err).encode())
    assert leaks == []


def test_a_ledger_row_already_holding_an_echoed_credential_is_shown_masked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The row is written past bringup (as a database from before this masking would hold it); `list` and
    `ticket` resolve no credential, yet mask every one the site names."""
    site = copy_sim_site(tmp_path / "sim")
    db = tmp_path / "state.db"
    monkeypatch.setenv("BRINGUP_SIM_UFM_PASSWORD", UFM_PASSWORD)
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", BMC_PASSWORD)
    for name in ("BRINGUP_STATE_DB", "BRINGUP_SITE"):
        monkeypatch.delenv(name, raising=False)
    assert fabric_main(["ports", "list", "--site", str(site), "--db", str(db)]) == 1  # no database yet
    assert provision_main(["status", "--site", str(site), "--db", str(db)]) == 0  # creates the store
    Ledger(StateStore(db))  # its table
    secret_values.forget_all()  # what this test process held: the commands below must find the site's own
    echo = f"UFM said: bad password {UFM_PASSWORD!r} for admin; bmc root:{BMC_PASSWORD}"
    ends = [{"guid": LEAF, "port": 1, "name": "leaf-A", "is_switch": True},
            {"guid": SPINE, "port": 1, "name": "spine-A", "is_switch": True}]
    link = f"0x{LEAF}[1]-0x{SPINE}[1]"
    with sqlite3.connect(db) as raw:
        raw.execute("INSERT INTO port_ledger (link, at, actor, command, state, via, why, ends, evidence, ticket, "
                    "detail) VALUES (?, 1.0, 'old', 'fabric ports apply', 'disabled', 'ufm', ?, ?, ?, ?, '')",
                    (link, f"flapping: {echo}", json.dumps({"ends": ends, "cable": None}),
                     json.dumps([{"source": "ufm", "time": "2026-12-01 12:00:00", "code": 329, "text": echo}]),
                     f"ticket: {echo}\n"))
    assert UFM_PASSWORD.encode() in db.read_bytes() or any(UFM_PASSWORD.encode() in p.read_bytes()
                                                           for p in tmp_path.glob("state.db*"))
    capsys.readouterr()
    assert fabric_main(["ports", "list", "--json", "--site", str(site), "--db", str(db)]) == 0
    assert fabric_main(["ports", "list", "--site", str(site), "--db", str(db)]) == 0
    assert fabric_main(["ports", "ticket", link, "--site", str(site), "--db", str(db)]) == 0
    out = capsys.readouterr()
    assert out.out.count("********") >= 5 and "bad password" in out.out
    assert _leaks("output", (out.out + out.err).encode()) == []
    secret_values.forget_all()
    page = tmp_path / "report.html"
    assert provision_main(["report", "--site", str(site), "--db", str(db), "--run-dir", str(tmp_path),
                           "--out", str(page)]) == 0
    assert "bad password" in page.read_text() and _leaks("report.html", page.read_bytes()) == []
