"""`fabric burnin plan --site`, `run`, `judge --record` and `nightly` through the CLI on the simulated lab
(ibsim routed by the real opensm, the SSH hosts' ib_write_bw): plan around a port the discovery shows down,
resume a run, hosts to burned_in and golden, the nightly job leaves the running job's hosts alone, rotates
its stages, keeps per-link history and writes its report and Prometheus textfile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.burnin.history import History, LinkRow
from fabric.cli import main as fabric_main
from fabric.design import load_design
from provision.site import load_site
from provision.state import State, StateStore
from sim.ibfabric import IbFabric
from sim.ibfabric.routing import route
from sim.sshhosts.harness import SshLab
from tests.sites import copy_sim_site

pytestmark = pytest.mark.tools("ibsim", "opensm", "perfquery")
HOSTS = ["gpu-r1-01", "gpu-r1-02", "gpu-r1-04", "gpu-r1-05"]


def _fabric(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = fabric_main(["burnin", *argv])
    return code, capsys.readouterr().out


def test_plan_run_judge_and_two_nights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    site_file = copy_sim_site(tmp_path / "sim")
    (tmp_path / "sim" / "fabric-faults.yml").unlink()
    # golden after burn-in alone: the firmware baseline's gate (never inventoried here) is tests/firmware's
    site_file.write_text(site_file.read_text().replace("  pxe_power_policy: off-on\n",
                                                      "  pxe_power_policy: off-on\n  golden_requires_baseline: false\n"))
    site = load_site(site_file)
    assert site.fabric_design is not None
    db = tmp_path / "state.db"
    store = StateStore(db)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    for host in HOSTS:
        store.mark(host, State.healthy, reason="test setup")
    with IbFabric(load_design(site.fabric_design), state_file=site.paths.ib_diags) as fabric, \
            SshLab(site_file, tmp_path / "sim" / "health-faults.yml", tmp_path / "run") as lab:
        for key, value in lab.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("BRINGUP_STATE_DB", str(db))
        fabric.unlink("gpu-r1-05/mlx5_2", 1)  # its cable is pulled: the host is planned around
        route(fabric, "ftree")
        code, out = _fabric(capsys, "plan", "--site", str(site_file), "--json")
        assert code == 0
        plan = json.loads(out)
        assert [s["host"] for s in plan["skipped_hosts"]] == ["gpu-r1-05"]
        assert {f["src_host"] for st in plan["stages"] for f in st} == {"gpu-r1-01", "gpu-r1-02", "gpu-r1-04"}
        (tmp_path / "plan.json").write_text(out)
        args = ["--plan", str(tmp_path / "plan.json"), "--site", str(site_file), "--duration", "1", "--grace", "0.3"]
        code, out = _fabric(capsys, "run", *args)
        assert code == 0 and f"stage {len(plan['stages'])}: " in out
        code, out = _fabric(capsys, "judge", "--site", str(site_file), "--record", "--json")
        verdict = json.loads(out)
        assert code == 0 and verdict["counts"]["pass"] > 0 and "fail" not in verdict["counts"]
        assert sorted(verdict["recorded"]["golden"]) == ["gpu-r1-01", "gpu-r1-02", "gpu-r1-04"]
        assert store.get("gpu-r1-05").state is State.healthy  # never burned: not golden
        # the HCAs the burn-in proved are the host's facts: 8 node GUIDs, as ibnetdiscover names them
        proved = store.facts("gpu-r1-01").hca_guids
        assert proved is not None and len(proved) == 8 and all(g.startswith("0x") and len(g) == 18 for g in proved)
        in_use = tmp_path / "job.hosts"
        in_use.write_text("gpu-r1-04 slots=8\n")
        prom = tmp_path / "bringup_burnin.prom"
        nights = []
        for night in ("2026-12-01", "2026-12-02"):
            code, out = _fabric(capsys, "nightly", "--site", str(site_file), "--budget", "61s", "--duration", "1",
                                "--in-use", str(in_use), "--night", night, "--prom", str(prom), "--json")
            assert code == 0, out
            nights.append(json.loads(out))
    assert nights[0]["in_use"] == ["gpu-r1-04"] and nights[0]["idle_hosts"] == ["gpu-r1-01", "gpu-r1-02"]
    assert len(nights[0]["stages_run"]) == 1 and nights[0]["stages_run"] != nights[1]["stages_run"]
    assert all(n["links_burned"] > 0 for n in nights)
    text = prom.read_text()
    assert 'bringup_burnin_link_nights_since_burned{' in text and "# TYPE bringup_burnin_link_flagged gauge" in text
    burned_at_night = _night_rows(db)
    assert {r.night for r in burned_at_night} == {"2026-12-01", "2026-12-02"}
    assert not [r for r in burned_at_night if "gpu-r1-04" in r.name]  # the running job's host was left alone


def _night_rows(db: Path) -> list[LinkRow]:
    rows = History(StateStore(db)).link_history()
    return [r for rs in rows.values() for r in rs if r.night]
