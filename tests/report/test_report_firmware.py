"""The report's firmware section from a state store alone: versions per component beside the baseline (a host counted
once per version), the baseline's BIOS attributes on the hosts whose baseline names them, and each drift and fix
the baseline steps recorded, in order. Rows and evidence have the shapes provision/firmware writes (`FirmwareRow`,
`Judgement.as_json`, the apply steps' evidence); the demo's run checks the same section end to end
(tests/report/test_report_data.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.firmware.table import FirmwareRow, write_rows
from provision.site.firmware import FirmwareBaseline
from provision.state import State, StateStore
from report import gather, render_html
from report.gather_firmware import firmware_section
from report.gather_hosts import all_events

BASELINE = FirmwareBaseline.model_validate({
    "components": [{"kind": "nic", "min_version": "22.36.10.10"}, {"kind": "hca", "id": "InfiniBand.Slot.*",
                                                                    "version": "28.43.1014"}],
    "bios": {"SysProfile": "PerfOptimized"}})


def _inventory(nic: str, hca: str, profile: str) -> dict[str, Any]:
    comps = [{"kind": "nic", "key": "NIC.Integrated.1-1-1", "version": nic}]
    comps += [{"kind": "hca", "key": f"InfiniBand.Slot.{31 + i}-1", "version": hca} for i in range(8)]
    return {"components": comps, "bios": {"path": "/redfish/v1/Systems/S/Bios", "attributes": {"SysProfile": profile}}}


def _store(tmp_path: Path) -> StateStore:
    store = StateStore(tmp_path / "fw.db")
    store.sync_site([("a", "r1"), ("b", "r1"), ("ctl", "r1")])
    for host in ("a", "b", "ctl"):
        store.mark(host, State.healthy, reason="test setup")
    drift = {"firmware": [{"component": "NIC.Integrated.1-1-1", "kind": "nic", "pin": "nic", "seen": "22.31.10.10",
                           "wanted": ">= 22.36.10.10"}], "bios": [], "unknown": []}
    store.fail("b", "firmware_drift", command="firmware-inventory", evidence={"drift": drift})
    update = {"pin": "nic", "seen": ["22.31.10.10"], "wanted": ">= 22.36.10.10", "via": "SimpleUpdate",
              "image": "firmware/nic-22.36.10.10.bin", "state": "Completed"}
    store.transition("b", State.configured, command="firmware-apply",
                     evidence={"updates": [update], "reboot": {"power_state": "On"}, "on_baseline": True})
    write_rows(store, [
        FirmwareRow("a", 1.0, _inventory("22.36.10.10", "28.43.1014", "PerfOptimized"),
                    {"firmware": [], "bios": [], "unknown": []}, True, "firmware-inventory"),
        FirmwareRow("b", 2.0, _inventory("22.36.10.10", "28.39.1002", "PerfPerWattOptimizedOs"),
                    {"firmware": [{"component": "InfiniBand.Slot.31-1", "kind": "hca", "seen": "28.39.1002",
                                   "wanted": "28.43.1014"}],
                     "bios": [{"component": "SysProfile", "seen": "PerfPerWattOptimizedOs", "wanted": "PerfOptimized"}],
                     "unknown": []}, False, "firmware-apply"),
        FirmwareRow("ctl", 3.0, _inventory("22.36.10.10", "28.39.1002", "PowerSaver"),
                    {"firmware": [], "bios": [], "unknown": []}, True, "firmware-inventory"),  # no baseline
    ])
    return store


def test_versions_per_component_beside_the_baseline_and_who_is_off_it(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        section = firmware_section(store, all_events(store), {"a": BASELINE, "b": BASELINE})
    assert (section.ran, section.inventoried, section.on_baseline) == (True, 3, 2)
    kinds = {c.kind: c for c in section.components}
    assert kinds["hca"].baseline == "InfiniBand.Slot.*: 28.43.1014"
    assert kinds["hca"].versions == (("28.39.1002", 2), ("28.43.1014", 1))  # 8 HCAs of one host count once
    assert kinds["hca"].off == ("b",) and kinds["nic"].off == () and kinds["nic"].baseline == ">= 22.36.10.10"
    [profile] = section.bios
    # ctl's PowerSaver is not counted: its class has no baseline naming SysProfile
    assert profile.values == (("PerfOptimized", 1), ("PerfPerWattOptimizedOs", 1)) and profile.off == ("b",)


def test_each_drift_and_fix_is_an_event_in_order_with_what_was_seen_and_done(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        events = firmware_section(store, all_events(store), {}).events
    assert [(e.host, e.command, e.from_state, e.to_state, e.reason) for e in events] == [
        ("b", "firmware-inventory", "healthy", "failed", "firmware_drift"),
        ("b", "firmware-apply", "failed", "configured", "")]
    assert events[0].detail == "NIC.Integrated.1-1-1: 22.31.10.10 (wanted >= 22.36.10.10)"
    assert events[1].detail == ("nic: 22.31.10.10 -> >= 22.36.10.10 via SimpleUpdate (firmware/nic-22.36.10.10.bin), "
                                "task Completed; rebooted, read back: on its baseline")


def test_the_page_shows_the_spread_in_its_own_section_and_peer_text_only_as_text(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.fail("a", "bios_drift", command="firmware-inventory",
                   evidence={"drift": {"bios": [{"component": "<b>X</b>", "seen": "<script>", "wanted": "1"}]}})
        page = render_html(gather("fw", store, tmp_path, None))
    assert '<section id="firmware">' in page and "28.39.1002 (2), 28.43.1014 (1)" in page
    assert "<script>" not in page and "&lt;b&gt;X&lt;/b&gt;: &lt;script&gt; (wanted 1)" in page
