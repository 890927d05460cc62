"""`mlxfwmanager --query` parsed from a real capture (Cray-HPE/docs-csm, MIT; tests/fixtures/tools/mlxfwmanager/)
and judged against the site's pinned HCA firmware."""

from __future__ import annotations

from pathlib import Path

from tests.tools.conftest import expectations
from tools.health.catalog import probes
from tools.health.config import Expectations
from tools.health.mlxfw import CHECKS, PROBE, judge, parse_query
from tools.health.outcome import OK, UNKNOWN, WARN
from tools.health.probes import TOOL_MISSING, ProbeResult, failed

CHECK = CHECKS[0]
CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "mlxfwmanager"
           / "query__Cray-HPE-docs-csm__2xConnectX5.txt").read_text()


def exp(*firmware: str, query: bool = True) -> Expectations:
    return expectations("expectations-h200x2-ib.json", ib={"hca_count": 2, "firmware": list(firmware),
                                                            "firmware_query": query})


def test_both_connectx5_devices_of_the_capture_with_versions_psid_and_status() -> None:
    devices = parse_query(CAPTURE)
    assert [d.name for d in devices] == ["/dev/mst/mt4119_pciconf1", "/dev/mst/mt4119_pciconf0"]
    first = devices[0]
    assert first.fields["PSID"] == "MT_0000000011" and first.fields["Part Number"] == "MCX515A-CCA_Ax_Bx"
    assert first.versions == {"FW": ("16.28.4000", None), "PXE": ("3.6.0103", None), "UEFI": ("14.21.0021", None)}
    assert first.status == "No matching image found" and first.firmware == "16.28.4000"


def test_the_pinned_firmware_passes_and_another_is_named_with_device_and_psid() -> None:
    assert judge(CAPTURE, 0, exp("16.28.4000")).status == OK
    off = judge(CAPTURE, 0, exp("16.35.2000"))
    assert off.status == WARN and off.reason == "ib_firmware_mismatch"
    assert off.evidence[0] == "/dev/mst/mt4119_pciconf1 (MT_0000000011): FW 16.28.4000, site allows 16.35.2000"


def test_an_absent_tool_or_a_failed_query_is_unknown_and_the_check_runs_only_where_asked() -> None:
    missing = failed(PROBE, TOOL_MISSING, "mlxfwmanager is not installed (not found on PATH)", rc=127)
    assert CHECK.evaluate({PROBE: missing}, exp("1")).status == UNKNOWN
    no_mst = "-E- No devices found or specified, mst might be stopped, run 'mst start' to load MST modules\n"
    assert CHECK.evaluate({PROBE: ProbeResult(PROBE, no_mst, 20)}, exp("1")).status == UNKNOWN
    assert CHECK.evaluate({PROBE: ProbeResult(PROBE, CAPTURE[:200], 0)}, exp("1")).status == UNKNOWN  # cut mid-line
    assert CHECK.not_applicable(exp("1", query=False)) is not None
    assert PROBE not in probes(exp("1", query=False))
    assert PROBE in probes(exp("1"))
