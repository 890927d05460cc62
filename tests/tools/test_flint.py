"""`flint -d <device> query` parsed from real outputs (openstack/ironic-python-agent's NVIDIA firmware manager tests,
Apache-2.0; tests/fixtures/tools/flint/SOURCE.md), and the HCA firmware check reading flint where mlxfwmanager is
not installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.tools.conftest import expectations
from tools.health import flint, mlxfw
from tools.health.catalog import probes
from tools.health.config import Expectations
from tools.health.errors import ParseError
from tools.health.outcome import OK, UNKNOWN, WARN
from tools.health.probes import TOOL_MISSING, ProbeResult, failed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "flint"
CX6 = (FIXTURES / "query__ironic-python-agent__ConnectX6.txt").read_text()
CX6_RUNNING = (FIXTURES / "query__ironic-python-agent__ConnectX6_running.txt").read_text()
IMAGE = (FIXTURES / "image_query__ironic-python-agent.txt").read_text()
CHECK = mlxfw.CHECKS[0]
NO_MLXFWMANAGER = failed(mlxfw.PROBE, TOOL_MISSING, "mlxfwmanager is not installed (not found on PATH)", rc=127)


def exp(*firmware: str) -> Expectations:
    return expectations("expectations-h200x2-ib.json", ib={"hca_count": 2, "firmware": list(firmware),
                                                            "firmware_query": True})


def sections(*parts: tuple[str, str]) -> str:
    """The probe's output: our `### <pci>` line before each device's own query."""
    return "".join(f"### {pci}\n{text}" for pci, text in parts)


def test_a_device_query_gives_its_image_type_versions_and_psid() -> None:
    q = flint.parse_query(CX6)
    assert (q.image_type, q.flash_version, q.running_version, q.psid) == ("FS4", "20.35.1012", "20.35.1012",
                                                                          "MT_0000000228")
    assert not q.reset_pending
    assert q.get("FW Release Date") == "28.10.2022" and q.get("Image VSD") is None  # N/A


def test_a_burn_not_yet_reset_runs_the_old_version_and_says_the_reset_is_pending() -> None:
    q = flint.parse_query(CX6_RUNNING)
    assert (q.flash_version, q.running_version, q.reset_pending) == ("20.35.1012", "20.34.1002", True)


def test_an_image_files_query_gives_its_version_and_psid_and_the_lines_after_a_continued_value() -> None:
    q = flint.parse_query(IMAGE)
    assert (q.flash_version, q.running_version, q.psid, q.reset_pending) == ("20.36.1012", "20.36.1012",
                                                                            "MT_0000000228", False)
    assert q.get("Device VSD") is None and q.get("Security Ver") == "0"  # N/A; a line after Rom Info's second line


def test_text_that_is_no_query_is_refused() -> None:
    with pytest.raises(ParseError, match="not a flint query"):
        flint.parse_query("mlxfwmanager: command not found\n")
    with pytest.raises(ParseError):
        flint.parse_query("")


def test_without_mlxfwmanager_the_check_reads_flint_per_hca_and_names_a_pending_reset() -> None:
    out = sections(("0000:3b:00.0", CX6), ("0000:86:00.0", CX6_RUNNING))
    results = {mlxfw.PROBE: NO_MLXFWMANAGER, flint.PROBE: ProbeResult(flint.PROBE, out, 0)}
    ok = CHECK.evaluate(results, exp("20.35.1012", "20.34.1002"))
    assert ok.status == OK and "2 HCA(s) on FW 20.34.1002, 20.35.1012 (PSID MT_0000000228; flint)" in ok.summary
    off = CHECK.evaluate(results, exp("20.35.1012"))
    assert off.status == WARN and off.reason == "ib_firmware_mismatch"
    assert off.evidence == ("0000:86:00.0 (MT_0000000228): FW 20.34.1002 running, 20.35.1012 on the flash (reset "
                            "pending), site allows 20.35.1012",)


def test_an_hca_flint_cannot_query_or_no_tool_at_all_is_unknown_never_healthy() -> None:
    broken = sections(("0000:3b:00.0", CX6), ("0000:86:00.0", "-E- Cannot open device\n"))
    results = {mlxfw.PROBE: NO_MLXFWMANAGER, flint.PROBE: ProbeResult(flint.PROBE, broken, 0)}
    outcome = CHECK.evaluate(results, exp("20.35.1012"))
    assert outcome.status == UNKNOWN and "0000:86:00.0: not a flint query: -E- Cannot open device" in outcome.summary
    none = ProbeResult(flint.PROBE, "neither flint nor mstflint is installed\n", 127)
    gone = CHECK.evaluate({mlxfw.PROBE: NO_MLXFWMANAGER, flint.PROBE: none}, exp("20.35.1012"))
    assert gone.status == UNKNOWN and gone.reason == TOOL_MISSING


def test_mlxfwmanager_where_installed_is_read_and_the_flint_probe_says_nothing(tmp_path: Path) -> None:
    mlx = ProbeResult(mlxfw.PROBE, "Querying Mellanox devices firmware ...\n", 0)
    outcome = CHECK.evaluate({mlxfw.PROBE: mlx, flint.PROBE: ProbeResult(flint.PROBE, "", 0)}, exp("1"))
    assert outcome.status == UNKNOWN and "mlxfwmanager" in outcome.summary  # its own output, not flint's
    assert flint.PROBE in probes(exp("1")) and flint.PROBE in CHECK.probes
    # the probe's script itself: silent beside mlxfwmanager, exit 127 naming both tools where neither is installed
    (tmp_path / "mlxfwmanager").write_text("#!/bin/sh\n")
    (tmp_path / "mlxfwmanager").chmod(0o755)
    beside = subprocess.run(["/bin/sh", "-c", flint.SCRIPT], capture_output=True, text=True, timeout=10,
                            env={**os.environ, "PATH": str(tmp_path)}, check=False)
    assert (beside.returncode, beside.stdout) == (0, "")
    (tmp_path / "mlxfwmanager").unlink()
    alone = subprocess.run(["/bin/sh", "-c", flint.SCRIPT], capture_output=True, text=True, timeout=10,
                           env={**os.environ, "PATH": str(tmp_path)}, check=False)
    assert alone.returncode == 127 and "neither flint nor mstflint" in alone.stdout
