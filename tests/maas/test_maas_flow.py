"""`provision maas deploy` takes PXE-armed hosts to deployed, triages failures, and resumes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from provision.cli import main
from provision.maas import step
from provision.maas.client import MaasClient
from provision.maas.step import DeployOptions, MaasDeployStep
from provision.site.credentials import Login, Secret
from provision.site.loader import load_site
from provision.site.model import Site
from provision.state import State, StateStore
from provision.steps.runner import HostResult
from sim.maas.machines import NodeStatus
from tests.maas.conftest import API_KEY, LostAnswers, RunningMaas
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
        store.transition(host, State.macs_harvested, command="test", evidence={"inventory": inventory},
                         facts={k: v for k, v in inventory.items() if v})
        store.transition(host, State.pxe_armed, command="test")
    store.close()
    return target / "site.yml"


def _deploy(site: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[dict[str, object]]]:
    code = main(["maas", "deploy", "--site", str(site), "--json", "--poll", "0.02", "--timeout", "20", *extra])
    return code, json.loads(capsys.readouterr().out)


def _in_maas(maas: RunningMaas, host: str, status: NodeStatus) -> str:
    """A machine MAAS already holds for `host` (with its harvested PXE MAC), in `status`."""
    mac = f"b8:ce:f6:00:01:0{HOSTS.index(host)}"
    machine = maas.sim.create({"hostname": [host], "architecture": ["amd64/generic"], "mac_addresses": [mac],
                               "power_type": ["manual"], "commission": ["false"]})
    machine.status = status
    return machine.system_id


def test_deploy_learns_each_hosts_maas_system_id_and_os_address(site: Path, maas: RunningMaas,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[1-2]")
    assert code == 0
    store = StateStore(site.parent / "state" / "sim.db")
    facts = store.facts_many(["gpu-r1-01", "gpu-r1-02"])
    for row in rows:
        machine = maas.sim.machines[str(row["system_id"])]
        assert facts[str(row["host"])].maas_system_id == machine.system_id
        assert facts[str(row["host"])].os_address == machine.ip_addresses[0]
    assert facts["gpu-r1-01"].os_address != facts["gpu-r1-02"].os_address
    store.close()


def test_deploy_records_each_step_and_triages_failures(site: Path, maas: RunningMaas,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    maas.sim.faults = {"gpu-r1-02": "commissioning_fails", "gpu-r1-03": "deploy_fails"}
    maas.power.broken = {"127.0.16.4:8443"}  # gpu-r1-04's BMC does not answer MAAS's power calls
    code, rows = _deploy(site, capsys)
    by_host = {r["host"]: r for r in rows}
    assert code == 2
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
    assert by_host["gpu-r1-06"]["reason"] == "no_harvested_mac" and code == 2
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


def test_a_machine_in_a_maas_status_the_flow_does_not_handle_fails_as_a_state_conflict(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]) -> None:
    held = {"gpu-r1-01": NodeStatus.BROKEN, "gpu-r1-02": NodeStatus.MISSING, "gpu-r1-03": NodeStatus.RETIRED,
            "gpu-r1-04": NodeStatus.FAILED_RELEASING}
    ids = {host: _in_maas(maas, host, status) for host, status in held.items()}
    _in_maas(maas, "gpu-r1-05", NodeStatus.FAILED_COMMISSIONING)  # commissioning is run again
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[1-5]")
    by_host = {r["host"]: r for r in rows}
    assert code == 2 and by_host["gpu-r1-05"]["state"] == "deployed"
    for host, name in zip(held, ("Broken", "Missing", "Retired", "Releasing failed"), strict=True):
        assert by_host[host]["reason"] == "maas_state_conflict", by_host[host]
        assert name in str(by_host[host]["detail"]) and by_host[host]["remediation"]
        assert maas.sim.machines[ids[host]].status is held[host], "MAAS was asked to act on it anyway"
    store = StateStore(site.parent / "state" / "sim.db")
    assert State.commissioned not in [e.to_state for e in store.history("gpu-r1-01")]
    assert store.get("gpu-r1-01").reason == "maas_state_conflict"


def test_an_enlistment_whose_answer_was_lost_is_recognised_not_rejected(
        site: Path, maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> None:
    lost = LostAnswers(maas.sim.create)  # MAAS enlists gpu-r1-01, but its answer comes after the client gave up
    monkeypatch.setattr(maas.sim, "create", lost)
    loaded = load_site(site)
    store = StateStore(site.parent / "state" / "sim.db")
    hosts = [h for h in loaded.hosts() if h.hostname == "gpu-r1-01"]

    async def run() -> list[HostResult]:
        async with MaasClient(maas.url, Secret(API_KEY), timeout_s=0.3) as client:
            try:
                return await MaasDeployStep(loaded, store, client, DeployOptions(poll_s=0.02, host_timeout_s=20)).run(hosts)
            finally:
                lost.release()

    [outcome] = asyncio.run(run())
    assert outcome.state is State.deployed, outcome
    assert lost.calls == 1
    assert [e.to_state for e in store.history("gpu-r1-01")][-3:] == [State.enlisted, State.commissioned, State.deployed]


def test_an_unresolvable_bmc_credential_fails_only_the_hosts_that_need_it(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_SIM_BMC_PASSWORD")
    _in_maas(maas, "gpu-r1-03", NodeStatus.READY)  # MAAS already holds its power parameters: no credential needed
    resolved: list[str] = []
    real_login = step.login

    def login(site: Site, name: str) -> Login:
        resolved.append(name)
        return real_login(site, name)

    monkeypatch.setattr(step, "login", login)
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[1-3]")
    by_host = {r["host"]: r for r in rows}
    assert code == 2 and by_host["gpu-r1-03"]["state"] == "deployed"
    for host in ("gpu-r1-01", "gpu-r1-02"):
        assert by_host[host]["reason"] == "credential_unresolved"
        assert "BRINGUP_SIM_BMC_PASSWORD is not set" in str(by_host[host]["detail"]) and by_host[host]["remediation"]
    assert resolved == ["bmc-default"], "the credential was resolved once per host instead of once"
    assert not any(m.hostname in ("gpu-r1-01", "gpu-r1-02") for m in maas.sim.machines.values())


def test_the_os_series_and_architecture_come_from_the_site(site: Path, maas: RunningMaas,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = site.read_text()
    site.write_text(text.replace("maas:\n", "maas:\n  distro_series: noble\n  architecture: arm64/generic\n", 1))
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-01")
    assert code == 0 and rows[0]["state"] == "deployed"
    machine = next(m for m in maas.sim.machines.values() if m.hostname == "gpu-r1-01")
    assert (machine.distro_series, machine.architecture) == ("noble", "arm64/generic")
    maas.sim.machines.clear()
    _deploy(site, capsys, "--hosts", "gpu-r1-02", "--distro", "jammy")  # the option still wins for one run
    machine = next(m for m in maas.sim.machines.values() if m.hostname == "gpu-r1-02")
    assert machine.distro_series == "jammy"


def test_a_failed_deployment_is_released_through_releasing_and_a_failed_release_is_its_own_reason(
    site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]
) -> None:
    maas.sim.faults = {"gpu-r1-03": "deploy_fails", "gpu-r1-04": "deploy_fails"}
    _deploy(site, capsys, "--hosts", "gpu-r1-0[3-4]")
    maas.sim.faults = {"gpu-r1-04": "release_fails"}  # 03 repaired; 04's disks cannot be erased
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[3-4]")
    by_host = {r["host"]: r for r in rows}
    assert code == 2 and by_host["gpu-r1-03"]["state"] == "deployed"
    assert by_host["gpu-r1-04"]["reason"] == "maas_release_failed"
    assert "Releasing failed" in str(by_host["gpu-r1-04"]["detail"])


def test_a_release_that_erases_disks_is_waited_for_and_a_failed_erase_is_a_release_failure(
    site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]
) -> None:
    maas.sim.faults = {"gpu-r1-03": "deploy_fails", "gpu-r1-04": "deploy_fails"}
    _deploy(site, capsys, "--hosts", "gpu-r1-0[3-4]")
    # The region erases disks on release: RELEASING, then DISK_ERASING, then READY (or FAILED_DISK_ERASING).
    maas.sim.faults = {"gpu-r1-03": "erase_disks", "gpu-r1-04": "erase_fails"}
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-0[3-4]")
    by_host = {r["host"]: r for r in rows}
    assert code == 2 and by_host["gpu-r1-03"]["state"] == "deployed"
    assert by_host["gpu-r1-04"]["reason"] == "maas_release_failed"
    assert "Failed disk erasing" in str(by_host["gpu-r1-04"]["detail"])


def test_a_maas_machine_with_the_hosts_name_but_a_foreign_mac_is_not_adopted_and_left_untouched(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]) -> None:
    foreign = maas.sim.create({"hostname": ["gpu-r1-01"], "architecture": ["amd64/generic"],
                               "mac_addresses": ["02:aa:bb:cc:dd:01"], "power_type": ["manual"],
                               "commission": ["false"]})
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-01")
    (row,) = rows
    assert code == 2 and row["reason"] == "maas_identity_mismatch", row
    assert "b8:ce:f6:00:01:00" in str(row["detail"]) and "02:aa:bb:cc:dd:01" in str(row["detail"])
    assert "rename or delete it in MAAS" in str(row["remediation"])
    assert foreign.status is NodeStatus.NEW and foreign.generation == 0, "MAAS was asked to act on it"
    assert maas.power.calls == [] and len(maas.sim.machines) == 1
    store = StateStore(site.parent / "state" / "sim.db")
    record = store.get("gpu-r1-01")
    assert record.state is State.failed and record.reason == "maas_identity_mismatch"
    assert record.evidence["maas_macs"] == ["02:aa:bb:cc:dd:01"] and record.evidence["pxe_mac"] == "b8:ce:f6:00:01:00"
    assert store.facts("gpu-r1-01").maas_system_id is None
    store.close()


def test_a_maas_machine_with_the_hosts_pxe_mac_under_another_hostname_is_adopted_by_mac(
        site: Path, maas: RunningMaas, capsys: pytest.CaptureFixture[str]) -> None:
    machine = maas.sim.create({"hostname": ["renamed-by-hand"], "architecture": ["amd64/generic"],
                               "mac_addresses": ["b8:ce:f6:00:01:01"], "power_type": ["manual"],
                               "commission": ["false"]})
    machine.status = NodeStatus.READY
    code, rows = _deploy(site, capsys, "--hosts", "gpu-r1-02")
    (row,) = rows
    assert code == 0 and row["state"] == "deployed", row
    assert row["system_id"] == machine.system_id and machine.status is NodeStatus.DEPLOYED
    assert len(maas.sim.machines) == 1, "enlisted a second machine for the same server"
    store = StateStore(site.parent / "state" / "sim.db")
    enlisted = next(e for e in store.history("gpu-r1-02") if e.to_state is State.enlisted)
    assert enlisted.evidence["adopted_by"] == "mac" and enlisted.evidence["maas_hostname"] == "renamed-by-hand"
    assert store.facts("gpu-r1-02").maas_system_id == machine.system_id
    store.close()
