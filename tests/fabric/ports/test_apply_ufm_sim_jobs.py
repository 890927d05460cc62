"""`fabric ports apply --apply` on the demo's plan through the UFM simulator, whose jobs take 1-5 s.

The embedded site (inventory/sim) with its ufm-faults.yml (two flapping host cables, one host port whose
symbol errors rise: the demo's three links) and, added here, its `jobs:` section: every job 1-5 s, one
disable job that hangs (leaf-A-r3-U30[7], the switch end of gpu-r1-07's link) and one that fails
(gpu-r1-05/mlx5_1, the HCA end of its link), each once. The first link goes alone and is disabled; the
other two run together: the hung job is still Running at `--job-timeout` and the ledger says
`job_timeout`, the failed job's error is in the ledger and the output (`apply_failed`). Every port's
state afterwards is what the simulator's fabric says. A rerun converges: the two unfinished links are
planned again though a port of one is disabled, and nothing disabled is sent again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.cli import main as fabric_main
from fabric.ports.ledger import APPLY_FAILED, DISABLED, JOB_TIMEOUT, PLANNED, Ledger, LedgerEntry
from fabric.topology import End
from provision.state import StateStore
from tests.fabric.ufmsim import UfmSite, ufm_site

pytestmark = pytest.mark.tools("ibsim", "opensm")
PASSWORD = "Ufm-jobs-sim"
JOBS = """jobs:
  duration_s: [1, 5]
  hang:
    - {node: leaf-A-r3-U30, port: 7, action: disable, times: 1}
  fail:
    - {node: gpu-r1-05/mlx5_1, port: 1, action: disable, times: 1, summary: "mlx5_1 port 1: MAD timeout (simulated)"}
"""
LINKS = {"gpu-r2-06": "0x0c42a10300000060[14]-0xb8599f03000006e0[1]",   # leaf-A-r3-U28[14], first: alone
         "gpu-r1-07": "0x0c42a10300000050[7]-0xb8599f0300000350[1]",    # leaf-A-r3-U30[7]: its switch end hangs
         "gpu-r1-05": "0x0c42a10300000010[5]-0xb8599f0300000210[1]"}    # leaf-A-r3-U38[5]: its HCA end fails


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UfmSite]:
    with ufm_site(tmp_path_factory.mktemp("ufmjobs"), PASSWORD, poll_s=30, more_faults=JOBS) as ufm:
        yield ufm


def _run(site: Path, db: Path, state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         *args: str) -> tuple[int, str]:
    monkeypatch.setenv("BRINGUP_SIM_UFM_PASSWORD", PASSWORD)
    monkeypatch.setenv("BRINGUP_IB_DIAGS", str(state))
    capsys.readouterr()
    code = fabric_main(["ports", "apply", "--site", str(site), "--db", str(db), *args])
    return code, capsys.readouterr().out


def _ends(row: LedgerEntry) -> dict[str, tuple[str, str]]:
    return {e.name: (e.done or "", e.job or "") for e in row.ends}


def test_each_ports_job_outcome_is_recorded_and_a_rerun_converges(
        lab: UfmSite, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    site, state = lab.site, lab.state
    db = tmp_path / "state.db"
    code, dry = _run(site, db, state, capsys, monkeypatch, "--json")
    assert code == 0 and [o["link"] for o in json.loads(dry)["report"]["links"]] == list(LINKS.values())

    started = time.monotonic()
    code, out = _run(site, db, state, capsys, monkeypatch, "--apply", "--job-timeout", "12s")
    took = time.monotonic() - started
    assert code == 1, out
    report = out[out.index("applied via ufm"):]
    assert f"  disabled         {LINKS['gpu-r2-06']}: " in report
    assert f"  job_timeout      {LINKS['gpu-r1-07']}: " in report
    assert f"  apply_failed     {LINKS['gpu-r1-05']}: " in report
    assert "Completed With Errors: mlx5_1 port 1: MAD timeout (simulated)" in report and "STOPPED: " in report

    with StateStore(db) as store:
        ledger = Ledger(store)
        current = ledger.current()
        first, hung, failed = (current[LINKS[h]] for h in ("gpu-r2-06", "gpu-r1-07", "gpu-r1-05"))
        planned = {r.link: r.at for r in ledger.history() if r.state == PLANNED}
    assert (first.state, hung.state, failed.state) == (DISABLED, JOB_TIMEOUT, APPLY_FAILED)
    assert all(done == "disabled" and job.startswith("UFM job ") and " Completed (seen after " in job
               for done, job in _ends(first).values())
    assert _ends(hung)["gpu-r1-07/mlx5_5"][0] == "disabled"
    assert _ends(hung)["leaf-A-r3-U30"][0].startswith("job_timeout: disable 0c42a10300000050_7: UFM job ")
    assert "Running" in _ends(hung)["leaf-A-r3-U30"][0] and "after 12 s (the deadline)" in hung.detail
    assert _ends(failed)["gpu-r1-05/mlx5_1"][0].startswith("failed: disable b8599f0300000210_1: UFM job ")
    assert "Completed With Errors: mlx5_1 port 1: MAD timeout (simulated)" in failed.detail
    assert _ends(failed)["leaf-A-r3-U38"][0] == "not attempted"
    # the first link alone (its two jobs, 1-5 s each), then the other two together
    assert planned[LINKS["gpu-r1-07"]] - planned[LINKS["gpu-r2-06"]] > 2
    assert abs(planned[LINKS["gpu-r1-05"]] - planned[LINKS["gpu-r1-07"]]) < 1 and took < 45
    # what the simulator's fabric says now: exactly the ports whose jobs completed are disabled
    assert lab.phys(End("0c42a10300000060", 14), End("b8599f03000006e0", 1), End("b8599f0300000350", 1),
                    End("0c42a10300000050", 7), End("b8599f0300000210", 1), End("0c42a10300000010", 5)) == \
        ["Disabled", "Disabled", "Disabled", "Polling", "LinkUp", "LinkUp"]

    code, out = _run(site, db, state, capsys, monkeypatch, "--apply", "--job-timeout", "12s")
    assert code == 0 and "2 link(s) to disable" in out, out
    with StateStore(db) as store:
        current = Ledger(store).current()
    assert {current[link].state for link in LINKS.values()} == {DISABLED}, out
    assert _ends(current[LINKS["gpu-r1-07"]])["gpu-r1-07/mlx5_5"][0] == "already disabled (nothing sent)"
    assert _ends(current[LINKS["gpu-r1-07"]])["leaf-A-r3-U30"][0] == "disabled"
    assert {done for done, _job in _ends(current[LINKS["gpu-r1-05"]]).values()} == {"disabled"}
