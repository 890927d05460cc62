"""pxe-boot and power through the CLI against the simulator: one-time PXE really boots once, power
faults are triaged, re-runs touch nothing, and power on/off/cycle/status do what they say."""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.bmc import HarvestStep
from provision.cli import main
from provision.site import load_site
from provision.state import State, StateStore
from provision.steps.runner import HostResult
from tests.redfish.simlab import PASSWORD_VAR, SimProcess, free_port, new_password, write_site


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimProcess, Path, Path]]:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    site = write_site(tmp_path, 6, free_port())
    faults = tmp_path / "faults.yml"
    faults.write_text(yaml.safe_dump({"faults": {"h004": ["power_fault"], "h005": ["pxe_link_down"]}}))
    with SimProcess(site, password, tmp_path / "run", power_delay_ms=150, faults=faults) as sim:
        yield sim, site, tmp_path / "state.db"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_pxe_boot_arms_once_boots_from_pxe_and_records_pxe_armed(
    lab: tuple[SimProcess, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sim, site, db = lab
    common = ["--site", str(site), "--db", str(db)]
    code, harvest = cli(capsys, "harvest-macs", *common, "--csv", str(db.parent / "m.csv"))
    assert code == 2  # h005's PXE NIC has no link
    assert harvest["counts"] == {"done": 5, "already": 0, "failed": 1, "skipped_failed_earlier": 0}
    rows = list(csv.DictReader((db.parent / "m.csv").open()))
    assert [r["hostname"] for r in rows] == ["h000", "h001", "h002", "h003", "h004"]
    assert all(r["pxe_mac"] and r["pxe_nic"] == "NIC.Integrated.1-1-1" for r in rows)
    exported = yaml.safe_load(Path(harvest["exports"]["yaml"]).read_text())
    assert Path(harvest["exports"]["yaml"]) == db.parent / "t-macs.yaml"
    assert sorted(exported["hosts"]) == ["h000", "h001", "h002", "h003", "h004"]
    h0 = exported["hosts"]["h000"]
    assert h0["pxe_mac"] == rows[0]["pxe_mac"] and h0["pxe_mac"] in h0["mac_addresses"]
    assert h0["power"] == {"type": "redfish", "address": rows[0]["bmc_address"] + ":" + rows[0]["bmc_port"],
                           "node_id": "System.Embedded.1", "credential": "bmc"}
    assert Path(harvest["exports"]["dhcpd"]) == db.parent / "t-dhcpd.conf"
    assert "host h000 {" in Path(harvest["exports"]["dhcpd"]).read_text()
    dnsmasq = Path(harvest["exports"]["dnsmasq"]).read_text().splitlines()
    assert [line for line in dnsmasq if line.startswith("dhcp-host=")] == [
        f"dhcp-host={r['pxe_mac']},{r['hostname']}" for r in rows]  # h005 (no link) is not there

    # h001 is already on: the policy powers it off first, then on.
    sim_hosts = sim.hosts()
    assert sim_hosts["h001"]["power"] == "Off"
    code, _ = cli(capsys, "power", "on", *common, "--hosts", "h001", "--poll", "0.05")
    assert code == 0

    code, pxe = cli(capsys, "pxe-boot", *common, "--poll", "0.05", "--power-timeout", "2")
    assert code == 2
    results = {h["host"]: h for h in pxe["hosts"]}
    assert results["h004"]["reason"] == "power_fault"
    assert results["h005"]["skipped"] is True
    assert results["h001"]["data"]["resets"] == ["ForceOff", "On"]
    assert results["h000"]["data"]["resets"] == ["On"]
    assert results["h000"]["data"]["boot_armed"] == {
        "BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}
    assert results["h000"]["data"]["etag_used"] is True
    after = sim.hosts()
    for host in ("h000", "h001", "h002", "h003"):
        assert after[host]["power"] == "On"
        assert after[host]["boots"][-1] == "Pxe"  # the next boot really went to PXE...
        assert after[host]["boot"]["BootSourceOverrideEnabled"] == "Disabled"  # ...and only that one
        assert after[host]["sessions"] == 0
    store = StateStore(db)
    assert store.in_state(State.pxe_armed) == ["h000", "h001", "h002", "h003"]
    assert store.get("h004").reason == "power_fault"

    code, again = cli(capsys, "pxe-boot", *common, "--poll", "0.05", "--power-timeout", "2")
    assert [h["host"] for h in again["hosts"] if not h["skipped"]] == ["h004"]
    assert sim.hosts()["h000"]["resets"] == after["h000"]["resets"]  # armed hosts were not reset again


def test_power_off_cycle_and_status(lab: tuple[SimProcess, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    sim, site, db = lab
    common = ["--site", str(site), "--db", str(db), "--hosts", "h00[0-2]", "--poll", "0.05"]
    code, on = cli(capsys, "power", "on", *common)
    assert code == 0 and all(h["data"]["power_state"] == "On" for h in on["hosts"])
    code, off = cli(capsys, "power", "off", *common, "--hosts", "h000")
    assert code == 0 and off["hosts"][0]["data"]["resets"] == ["ForceOff"]
    code, cycle = cli(capsys, "power", "cycle", *common, "--hosts", "h001")
    assert code == 0 and cycle["hosts"][0]["data"]["resets"] == ["ForceOff", "On"]
    code, status = cli(capsys, "power", "status", *common)
    assert {h["host"]: h["data"]["power_state"] for h in status["hosts"]} == {"h000": "Off", "h001": "On", "h002": "On"}
    assert [sim.hosts()[h]["power"] for h in ("h000", "h001", "h002")] == ["Off", "On", "On"]
    code, bad = cli(capsys, "power", "on", "--site", str(site), "--db", str(db), "--hosts", "h004",
                    "--power-timeout", "1", "--poll", "0.05")
    assert code == 2 and bad["hosts"][0]["reason"] == "power_fault"
    assert StateStore(db).get("h004").state is State.declared  # power commands do not move the lifecycle


def test_pxe_boot_follows_the_site_policy_and_the_options_override_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    password = new_password()
    monkeypatch.setenv(PASSWORD_VAR, password)
    site = write_site(tmp_path, 3, free_port(), policy="pxe_boot_mode: Legacy, pxe_power_policy: restart")
    db = tmp_path / "state.db"
    common = ["--site", str(site), "--db", str(db), "--poll", "0.05", "--power-timeout", "2"]
    with SimProcess(site, password, tmp_path / "run", power_delay_ms=100) as sim:
        assert cli(capsys, "harvest-macs", "--site", str(site), "--db", str(db))[0] == 0
        assert cli(capsys, "power", "on", *common, "--hosts", "h001,h002")[0] == 0

        code, by_site = cli(capsys, "pxe-boot", *common, "--hosts", "h000,h001")
        assert code == 0
        results = {h["host"]: h["data"] for h in by_site["hosts"]}
        assert results["h000"]["boot_armed"]["BootSourceOverrideMode"] == "Legacy"
        assert results["h000"]["resets"] == ["On"]
        assert results["h001"]["resets"] == ["ForceRestart"]  # already on: the site restarts it
        assert sim.hosts()["h001"]["boots"][-1] == "Pxe"

        code, by_options = cli(capsys, "pxe-boot", *common, "--hosts", "h002", "--boot-mode", "UEFI",
                               "--power-policy", "off-on")
        assert code == 0
        h002 = by_options["hosts"][0]["data"]
        assert h002["boot_armed"]["BootSourceOverrideMode"] == "UEFI"
        assert h002["resets"] == ["ForceOff", "On"]
        assert sim.hosts()["h002"]["boot"]["BootSourceOverrideMode"] == "UEFI"


def test_power_off_with_an_empty_or_unmatched_host_pattern_touches_no_server(
    lab: tuple[SimProcess, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sim, site, db = lab
    common = ["--site", str(site), "--db", str(db), "--poll", "0.05"]
    assert main(["power", "on", *common, "--hosts", "h00[0-1]"]) == 0
    capsys.readouterr()
    for pattern, message in (("", "names no host"), ("h9*", "matches no host")):  # `--hosts "$UNSET"`, a typo
        assert main(["power", "off", *common, "--hosts", pattern]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]
    assert [sim.hosts()[h]["power"] for h in ("h000", "h001")] == ["On", "On"]


def test_the_fan_out_reports_every_host_to_its_progress_callback_once(lab: tuple[SimProcess, Path, Path]) -> None:
    _, site_path, db = lab
    site = load_site(site_path)
    store = StateStore(db)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    for round_ in ("first run", "rerun: every host skipped"):
        seen: list[HostResult] = []
        results = asyncio.run(HarvestStep(site, store).run(site.hosts(), seen.append))
        assert sorted(r.host for r in seen) == sorted(h.hostname for h in site.hosts()), round_
        assert sorted(seen, key=lambda r: r.host) == sorted(results, key=lambda r: r.host), round_
    assert [r.host for r in seen if not r.ok] == ["h005"]  # pxe_link_down, failed in the first run
