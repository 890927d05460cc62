"""`provision maas deploy` takes PXE-armed hosts to deployed, triages failures, and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.cli import main
from provision.state import State, StateStore
from tests.maas.conftest import API_KEY, RunningMaas
from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]
HOSTS = [f"gpu-r1-0{i}" for i in range(1, 7)]


@pytest.fixture
def site(tmp_path: Path, maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BRINGUP_SIM_MAAS_API_KEY", API_KEY)
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", "bmc-pw-123")
    target = tmp_path / "site"
    site_file = copy_sim_site(target)
    site_file.write_text(site_file.read_text().replace("http://127.0.2.1:5240/MAAS/", maas.url))
    store = StateStore(target / "state" / "sim.db")
    store.sync_site([(h, "r1") for h in HOSTS])
    for i, host in enumerate(HOSTS):
        store.transition(host, State.bmc_reachable, command="test")
        inventory = {"pxe_mac": f"b8:ce:f6:00:01:0{i}", "macs": {"NIC.Integrated.1-1-1": f"b8:ce:f6:00:01:0{i}",
                                                                   "NIC.Integrated.1-2-1": f"b8:ce:f6:00:02:0{i}"}}
        if host == "gpu-r1-06":
            inventory = {"pxe_mac": None, "macs": {}}
        store.transition(host, State.macs_harvested, command="test", evidence={"inventory": inventory})
        store.transition(host, State.pxe_armed, command="test")
    store.close()
    return target / "site.yml"


def _deploy(site: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, object]]]:
    code = main(["maas", "deploy", "--site", str(site), "--json", "--poll", "0.02", "--timeout", "20"])
    return code, json.loads(capsys.readouterr().out)


def test_deploy_records_each_step_and_triages_failures(site: Path, maas: RunningMaas,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    maas.sim.faults = {"gpu-r1-02": "commissioning_fails", "gpu-r1-03": "deploy_fails"}
    maas.power.broken = {"127.0.16.4:8443"}  # gpu-r1-04's BMC does not answer MAAS's power calls
    code, rows = _deploy(site, capsys)
    by_host = {r["host"]: r for r in rows}
    assert code == 1
    assert by_host["gpu-r1-01"]["state"] == "deployed" and by_host["gpu-r1-05"]["state"] == "deployed"
    assert by_host["gpu-r1-02"]["reason"] == "maas_commissioning_failed"
    assert by_host["gpu-r1-03"]["reason"] == "maas_deploy_failed"
    assert by_host["gpu-r1-04"]["reason"] == "maas_power_error"
    assert by_host["gpu-r1-06"]["reason"] == "no_harvested_mac"
    assert "Installation failed" in str(by_host["gpu-r1-03"]["detail"])

    store = StateStore(site.parent / "state" / "sim.db")
    assert [e.to_state for e in store.history("gpu-r1-01")][-3:] == [State.enlisted, State.commissioned, State.deployed]
    failed = store.get("gpu-r1-03")
    assert failed.reason == "maas_deploy_failed" and failed.evidence["status_name"] == "Failed deployment"
    # the BMC password went to MAAS (it powers the machine) but never into the state store
    raw = b"".join(p.read_bytes() for p in (site.parent / "state").glob("sim.db*"))
    assert b"bmc-pw-123" not in raw
    assert maas.power.calls and all(c["power_pass"] == "bmc-pw-123" for c in maas.power.calls)


def test_a_second_run_after_repair_finishes_only_the_rest(site: Path, maas: RunningMaas,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    maas.sim.faults = {"gpu-r1-02": "commissioning_fails", "gpu-r1-03": "deploy_fails"}
    _deploy(site, capsys)
    store = StateStore(site.parent / "state" / "sim.db")
    done_before = len(store.history("gpu-r1-01"))
    maas.sim.faults = {}  # repaired
    code, rows = _deploy(site, capsys)
    by_host = {r["host"]: r for r in rows}
    assert by_host["gpu-r1-02"]["state"] == "deployed" and by_host["gpu-r1-03"]["state"] == "deployed"
    assert by_host["gpu-r1-01"]["detail"] == "already deployed"
    assert len(store.history("gpu-r1-01")) == done_before, "a deployed host was touched again"
    assert by_host["gpu-r1-06"]["reason"] == "no_harvested_mac" and code == 1
    # gpu-r1-03 was released and redeployed in MAAS, not enlisted twice
    assert sum(m.hostname == "gpu-r1-03" for m in maas.sim.machines.values()) == 1


def test_hosts_not_yet_pxe_armed_are_skipped_with_a_reason(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["maas", "deploy", "--site", str(site), "--hosts", "gpu-r2-*", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["state"] for r in rows} == {"declared"}
    assert all("not PXE-armed yet" in str(r["detail"]) for r in rows)


def test_the_table_output_shows_progress_and_a_summary(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["maas", "deploy", "--site", str(site), "--poll", "0.02", "--timeout", "20", "--hosts", "gpu-r1-0[1-2]"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "MAAS deployment" in out and "2 deployed, 0 failed, 0 skipped" in out
