"""`provision ethernet check` over SSH against the switch simulator (sim/switches: NX-OS and EOS prompts and
tables as ntc-templates' real captures show them): the cabling faults found, every switch-level fault
(refused login, hang mid-output, paging, unknown format) makes that switch `unknown` with its reason
without stalling the others, and the switches' password is nowhere in the output, the logs or argv."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest
import yaml

from provision.cli import main
from provision.ethernet.check import SCHEMA, check
from provision.ethernet.design import EthernetDesign
from provision.ethernet.triage import SwitchTriage
from provision.site import load_site
from provision.steps.runner import HostFailure
from tests.ethernet.conftest import PASSWORD, login
from tests.sites import copy_sim_site

TIMEOUT = 1.5


class _Collect(logging.Handler):
    def __init__(self, records: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def _site_with(lab: EthernetDesign, tmp_path: Path, switches: tuple[str, ...], hosts: tuple[str, ...]) -> Path:
    """A copy of the embedded site whose switch credential and Ethernet design point at `lab`'s switches."""
    site = copy_sim_site(tmp_path / "site")
    data = yaml.safe_load(site.read_text())
    data["credentials"]["switch_admin"] = {"username": "admin", "password": {"env": "TEST_SWITCH_PASSWORD"}}
    data["switches"] = {n: lab.switches[n].model_dump() for n in switches}  # declared in the site
    site.write_text(yaml.safe_dump(data))
    part = {"nics": {h: n.model_dump(exclude_none=True) for h, n in lab.nics.items() if h.startswith(hosts)}}
    (site.parent / "ethernet.yml").write_text(yaml.safe_dump(part))
    return site


@pytest.fixture(scope="module")
def checked(faulty_lab: EthernetDesign) -> tuple[dict[str, object], float, str]:
    logging.getLogger().setLevel(logging.DEBUG)  # netmiko/paramiko at their most talkative
    records: list[str] = []
    handler = _Collect(records)
    logging.getLogger().addHandler(handler)
    try:
        start = time.monotonic()
        report = check(faulty_lab, login, timeout=TIMEOUT)
        took = time.monotonic() - start
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)
    return report.to_json(), took, "\n".join(records)


def test_each_faulty_switch_is_unknown_with_its_reason_and_the_others_are_read(
        checked: tuple[dict[str, object], float, str]) -> None:
    data, took, _ = checked
    switches = {s["name"]: (s["state"], s["reason"]) for s in data["switches"]}  # type: ignore[attr-defined]
    assert all(switches[f"tor-r{i}"] == ("ok", "") for i in (1, 2, 3, 4))  # NX-OS, EOS, Dell OS10, SONiC
    assert switches["tor-r9"] == ("ok", "")  # LLDP off: MACs and ports still read
    assert switches["tor-r5"] == ("unknown", "login refused for user 'admin' (check the credential 'switch_admin')")
    assert switches["tor-r6"] == ("unknown", "'show mac address-table': no prompt within 1.5 s (hung mid-output)")
    assert switches["tor-r7"][1].endswith("paged its output (--More--) although paging was turned off")  # OS10
    assert "answered without its table header ('Syntax error: Illegal parameter')" in switches["tor-r8"][1]
    assert took < 3 * TIMEOUT + 4  # the hung switch bounds the run; nobody waits on it in turn


def test_the_cabling_faults_are_found_and_the_unread_switches_nics_are_unknown(
        checked: tuple[dict[str, object], float, str]) -> None:
    data, _, _ = checked
    assert data["schema"] == SCHEMA and data["ok"] is False
    findings = {(f["host"], f["role"]): f["status"] for f in data["findings"]}  # type: ignore[attr-defined]
    assert {k: v for k, v in findings.items() if v != "unknown"} == {
        ("gpu-r1-03", "pxe"): "wrong_port", ("gpu-r1-04", "pxe"): "wrong_port",
        ("gpu-r1-06", "pxe"): "not_seen", ("gpu-r2-07", "pxe"): "not_seen", ("gpu-r2-09", "pxe"): "err_disabled",
        ("gpu-r3-01", "pxe"): "wrong_port", ("gpu-r3-02", "pxe"): "wrong_port",  # on Dell OS10
        ("gpu-r4-05", "pxe"): "not_seen"}  # on SONiC
    assert data["counts"] == {"err_disabled": 1, "not_seen": 3, "ok": 112, "unknown": 96, "wrong_port": 4}
    switches = {s["name"]: s for s in data["switches"]}  # type: ignore[attr-defined]
    assert (switches["tor-r1"]["lldp"], switches["tor-r2"]["lldp"]) == (12, 10)  # over SSH: every linked PXE NIC
    no_lldp = "LLDP not read: 'show lldp neighbors detail' answered without its table header ('^')"
    assert (switches["tor-r9"]["lldp"], switches["tor-r9"]["lldp_reason"]) == (0, no_lldp)
    assert (switches["tor-r3"]["lldp"], switches["tor-r4"]["lldp"]) == (12, 11)
    sonic = next(f for f in data["findings"] if f["host"] == "gpu-r4-05")  # type: ignore[attr-defined]
    assert sonic["reason"].startswith("unplugged: not seen on any switch; designed port tor-r4 Ethernet28 has no link")
    silent = next(f for f in data["findings"] if f["host"] == "gpu-r1-06")  # type: ignore[attr-defined]
    assert "LLDP sees gpu-r1-06 eno1, no MAC learnt" in silent["reason"]


def test_the_switch_password_is_in_neither_the_json_nor_the_logs(checked: tuple[dict[str, object], float, str]) -> None:
    data, _, logs = checked
    assert all(f"tor-r{i}" in logs for i in (1, 2, 3, 4))  # captured, for each platform's sessions
    assert PASSWORD not in json.dumps(data) and PASSWORD not in logs


def test_the_command_reads_the_sites_credential_from_the_environment_and_exits_2_on_findings(
        faulty_lab: EthernetDesign, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    site = _site_with(faulty_lab, tmp_path, ("tor-r1", "tor-r5"), ("gpu-r1-",))
    monkeypatch.setenv("TEST_SWITCH_PASSWORD", PASSWORD)
    out = tmp_path / "ethernet-check.json"
    assert main(["ethernet", "check", "--site", str(site), "--timeout", "2", "--json", "--out", str(out)]) == 2
    printed = capfd.readouterr()
    assert json.loads(printed.out) == json.loads(out.read_text())
    assert PASSWORD not in printed.out + printed.err
    assert [s["state"] for s in json.loads(out.read_text())["switches"]] == ["ok", "unknown"]
    monkeypatch.delenv("TEST_SWITCH_PASSWORD")
    assert main(["ethernet", "check", "--site", str(site), "--timeout", "2"]) == 2  # every switch unknown
    assert "environment variable TEST_SWITCH_PASSWORD is not set" in capfd.readouterr().out
    assert main(["ethernet", "check", "--site", str(site), "--design", str(tmp_path / "none.yml")]) == 1


def test_a_pxe_link_failure_gets_the_switch_view_and_the_precise_reason(
        faulty_lab: EthernetDesign, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = load_site(_site_with(faulty_lab, tmp_path, ("tor-r1", "tor-r2"), ("gpu-r1-", "gpu-r2-")))
    monkeypatch.setenv("TEST_SWITCH_PASSWORD", PASSWORD)
    triage = SwitchTriage(site)
    down = HostFailure("pxe_nic_link_down", "NIC.Integrated.1-1-1 LinkStatus LinkDown", {"bmc": "x"})
    unplugged = asyncio.run(triage.refine("gpu-r2-07", None, down))
    assert unplugged.reason == "pxe_cable_unplugged", unplugged.evidence
    assert unplugged.evidence["bmc"] == "x"
    assert unplugged.evidence["switch_view"]["port"] == "Et31" and "tor-r2 Et31 has no link" in unplugged.detail
    assert unplugged.remediation == "plug gpu-r2-07's PXE NIC into tor-r2 Et31 (reseat or replace the cable)"
    crossed = asyncio.run(SwitchTriage(site).refine("gpu-r1-03", "02:00:00:01:02:03", down))
    assert crossed.reason == "pxe_cable_misplaced" and "swap these two cables" in (crossed.remediation or "")
    commissioning = HostFailure("maas_commissioning_failed", "Node operation 'Commissioning' timed out", {})
    disabled = asyncio.run(SwitchTriage(site).refine("gpu-r2-09", None, commissioning))
    assert disabled.reason == "pxe_port_err_disabled", disabled.evidence
    assert disabled.evidence["switch_view"]["status"] == "err_disabled" and "error-disabled" in disabled.detail
    not_armed = asyncio.run(triage.refine("gpu-r2-07", None, HostFailure("pxe_not_armed", "Boot None", {}, "queue")))
    assert (not_armed.reason, not_armed.remediation) == ("pxe_not_armed", "queue")  # pxe-boot: the BMC's reason stays
    assert not_armed.evidence["switch_view"]["status"] == "not_seen" and "tor-r2 Et31 has no link" in not_armed.detail
    other = HostFailure("bmc_auth", "401", {})
    assert asyncio.run(triage.refine("gpu-r2-07", None, other)) is other  # not a link failure: untouched


def test_a_cli_that_falls_behind_echoing_lines_twice_does_not_shift_the_answers() -> None:
    """netmiko's cisco_nxos.py and arista.py: a busy NX-OS/EOS echoes a line as it arrives and again after the
    prompts of the lines before it; the answer is what follows the second echo (HEAD's reader shifted them)."""
    from sim.switches.asbuilt import EthernetFaults
    from sim.switches.harness import running
    from tests.ethernet.conftest import PLATFORMS, lab

    design, asbuilt = lab(4, 2, EthernetFaults(switch_faults={f"tor-r{i}": "falls_behind" for i in range(1, 5)}),
                          PLATFORMS)
    for s in asbuilt["switches"]:  # beside the module's faulty lab, which holds port 2022 on these addresses
        s["port"] = 2023
    design = design.model_copy(update={"switches": {n: s.model_copy(update={"port": 2023})
                                                    for n, s in design.switches.items()}})
    with running(asbuilt, PASSWORD):
        data = check(design, login, timeout=TIMEOUT).to_json()
    assert [(s["name"], s["state"], s["macs"]) for s in data["switches"]] == [  # type: ignore[attr-defined]
        (f"tor-r{i}", "ok", 4) for i in range(1, 5)]
    assert data["ok"] is True
