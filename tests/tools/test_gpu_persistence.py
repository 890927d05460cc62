"""gpu_persistence: every GPU in persistence mode, read from real `nvidia-smi -q` captures (text and XML)."""

from __future__ import annotations

import re

import pytest

from tools.health import gpu
from tools.health.nvsmi import parse_smi_xml
from tools.health.outcome import OK, UNKNOWN, WARN

from .conftest import expectations, realdata

# The lent 2x H200 host (nvidia-persistenced in persistence mode) and thamada/gls's 8x H100 SXM (Apache-2.0).
CAPTURES = ("h200x2-captured-2026-11-29/nvidia-smi-q.txt", "nvidia-smi-q__thamada-gls__H100SXMx8.txt")


@pytest.mark.realdata
@pytest.mark.parametrize("capture", CAPTURES)
def test_real_hosts_in_persistence_mode_pass(capture: str) -> None:
    text = realdata(capture)
    outcome = gpu.parse_persistence(text, 0, expectations())
    gpus = len(re.findall(r"^GPU [0-9A-F]{8}:", text, re.MULTILINE))
    assert (outcome.status, outcome.summary) == (OK, f"persistence mode on for all {gpus} GPUs")


@pytest.mark.realdata
def test_a_gpu_out_of_persistence_mode_warns_naming_it() -> None:
    # The real H200 capture with its second GPU's line as nvidia-smi prints it when the daemon runs
    # --no-persistence-mode (Ubuntu's packaged unit).
    text = realdata(CAPTURES[0])
    first = text.index("Persistence Mode")
    second = text.index("Persistence Mode", first + 1)
    line_end = text.index("\n", second)
    planted = text[:second] + re.sub(r"Enabled$", "Disabled", text[second:line_end]) + text[line_end:]
    outcome = gpu.parse_persistence(planted, 0, expectations())
    assert (outcome.status, outcome.reason) == (WARN, "persistence_off")
    assert outcome.summary == "persistence mode off on 1 of 2 GPU(s)"
    assert len(outcome.evidence) == 1 and outcome.evidence[0].endswith("Persistence Mode Disabled")
    assert "--persistence-mode" in outcome.remediation


@pytest.mark.realdata
def test_the_xml_report_carries_the_persistence_mode_of_a_real_host_running_without_it() -> None:
    # influxdata/telegraf's A100 capture (MIT) was taken with persistence mode off.
    report = parse_smi_xml(realdata("nvidia-smi-q-x__influxdata-telegraf__a100-sxm4-v12.xml"), require_all=False)
    assert [g.persistence_mode for g in report.gpus] == ["Disabled"]


def test_no_gpu_listed_is_unknown() -> None:
    text = "Timestamp : Tue Dec  1 00:00:00 2026\nDriver Version : 580.159.04\nAttached GPUs : 0\n"
    assert gpu.parse_persistence(text, 0, expectations()).status == UNKNOWN
