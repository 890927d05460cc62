from __future__ import annotations

import re

import pytest

from tools.health.nvlink import parse_link_errors, parse_link_states, parse_nvlink_errors, parse_nvlink_state
from tools.health.outcome import CRITICAL, OK, UNKNOWN, WARN

from .conftest import expectations, realdata

pytestmark = pytest.mark.realdata


def test_h200_status_and_errors_parse() -> None:
    states = parse_link_states(realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt"))
    assert len(states) == 36 and {s.gbps for s in states} == {26.562}
    errors = parse_link_errors(realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-e.txt"))
    assert len(errors) == 108 and {e.counter for e in errors} == {"Replay", "Recovery", "CRC"}


def test_a100_status_capture_parses() -> None:
    states = parse_link_states(realdata("nvidia-smi-nvlink-status__leptonai-gpud__fabric-manager_testdata_a100.txt"))
    assert len(states) == 96 and {s.gbps for s in states} == {25.0}


def test_h200_links_pass() -> None:
    exp = expectations()
    assert parse_nvlink_state(realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt"), 0, exp).status == OK
    assert parse_nvlink_errors(realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-e.txt"), 0, exp).status == OK


def test_inactive_link_is_critical() -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt").replace(
        "Link 5: 26.562 GB/s", "Link 5: <inactive>", 1)
    outcome = parse_nvlink_state(text, 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "nvlink_inactive")
    assert "GPU 0: 17 of 18 links up (link 5: <inactive>)" in outcome.evidence


def test_growing_crc_errors_are_unhealthy() -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-e.txt").replace(
        "Link 3: CRC Errors: 0", "Link 3: CRC Errors: 1234", 1)
    outcome = parse_nvlink_errors(text, 0, expectations())
    assert (outcome.status, outcome.reason) == (WARN, "nvlink_errors")
    assert outcome.evidence == ("GPU 0 link 3: CRC 1234",)


def test_report_for_fewer_gpus_than_expected_is_not_trusted() -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt")
    first_gpu_only = text.split("GPU 1:")[0]
    outcome = parse_nvlink_state(first_gpu_only, 0, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "nvlink_report_incomplete")
    assert outcome.evidence == ("report covers 1 of 2 GPUs; not seen: GPU 1",) and outcome.remediation


def test_inactive_links_in_a_report_short_of_gpus_are_still_reported() -> None:
    # Before: ParseError "covers 1 GPUs" (unknown), and the inactive link it had parsed was dropped.
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt").replace(
        "Link 5: 26.562 GB/s", "Link 5: <inactive>", 1)
    first_gpu_only = text.split("GPU 1:")[0]
    outcome = parse_nvlink_state(first_gpu_only, 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "nvlink_inactive")
    assert outcome.evidence == ("GPU 0: 17 of 18 links up (link 5: <inactive>)",
                                "report covers 1 of 2 GPUs; not seen: GPU 1")
    assert "not seen: GPU 1" in outcome.summary


def test_a_gpu_cut_short_without_a_link_shown_down_is_not_condemned() -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-s.txt")
    cut = "".join(text.split("GPU 1:")[0].splitlines(keepends=True)[:7])  # GPU 0 header and 6 links
    outcome = parse_nvlink_state(cut, 0, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "nvlink_report_incomplete")
    assert outcome.evidence == ("report covers 1 of 2 GPUs; not seen: GPU 1", "GPU 0: 6 of 18 links up")


ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive\n"


def _second_gpu_without_links(name: str) -> str:
    """The H200 capture with GPU 1's link lines replaced by what NVML prints when none is active
    (leptonai/gpud#1085: the message sits right under the GPU header)."""
    text = realdata(f"h200x2-captured-2026-11-29/{name}")
    head, sep, tail = text.partition("GPU 1:")
    return head + sep + tail.splitlines(keepends=True)[0] + ALL_INACTIVE


def test_gpu_with_all_links_inactive_is_critical_not_unparseable() -> None:
    outcome = parse_nvlink_state(_second_gpu_without_links("nvidia-smi-nvlink-s.txt"), 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "nvlink_inactive")
    assert outcome.evidence == ("GPU 1: 0 of 18 links up (NVML: all links are inactive)",)


def test_error_report_of_a_gpu_without_active_links_still_judges_the_others() -> None:
    text = _second_gpu_without_links("nvidia-smi-nvlink-e.txt")
    outcome = parse_nvlink_errors(text, 0, expectations())
    assert outcome.status == OK and outcome.evidence == ("GPU 1: all links inactive, no counters",)
    grown = text.replace("Link 3: CRC Errors: 0", "Link 3: CRC Errors: 7", 1)
    assert parse_nvlink_errors(grown, 0, expectations()).reason == "nvlink_errors"


def test_na_error_counters_are_not_read_as_zero() -> None:
    text = realdata("h200x2-captured-2026-11-29/nvidia-smi-nvlink-e.txt")
    all_na = re.sub(r"Errors: \d+", "Errors: N/A", text)
    outcome = parse_nvlink_errors(all_na, 0, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "nvlink_counters_unavailable")
    some_na = text.replace("Link 0: CRC Errors: 0", "Link 0: CRC Errors: N/A", 1)
    outcome = parse_nvlink_errors(some_na, 0, expectations())
    assert outcome.status == OK and outcome.summary == "107 NVLink error counters, all within 0 (1 N/A)"
