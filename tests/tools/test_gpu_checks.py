"""Verdicts of the nvidia-smi -q checks, on the real captures and on faults planted in them."""

from __future__ import annotations

import re

import pytest

from tools.health import gpu
from tools.health.errors import ParseError
from tools.health.outcome import CRITICAL, OK, UNKNOWN, WARN

from .conftest import as_older_driver_prints_it, expectations, realdata, replay_text

H200Q = "h200x2-captured-2026-11-29/nvidia-smi-q.txt"


@pytest.mark.realdata
def test_lent_h200_passes_every_nvidia_smi_check() -> None:
    exp = expectations()
    text = realdata(H200Q)
    for parse in (gpu.parse_inventory, gpu.parse_ecc, gpu.parse_remapped_rows, gpu.parse_clock_events,
                  gpu.parse_versions, gpu.parse_fabric_state):
        outcome = parse(text, 0, exp)
        assert outcome.status == OK, outcome


@pytest.mark.realdata
def test_missing_gpu_is_critical() -> None:
    exp = expectations(gpu={"count": 8, "model": "NVIDIA H100 80GB HBM3"})
    outcome = gpu.parse_inventory(realdata("nvidia-smi-q__thamada-gls__H100NVLx2.txt"), 0, exp)
    assert (outcome.status, outcome.reason) == (CRITICAL, "missing_gpu")


@pytest.mark.realdata
def test_wrong_model_is_unhealthy() -> None:
    outcome = gpu.parse_inventory(realdata("nvidia-smi-q__thamada-gls__H100NVLx2.txt"), 0, expectations())
    assert (outcome.status, outcome.reason) == (WARN, "unexpected_gpu")


def test_driver_down_is_critical_and_other_failures_are_parse_errors() -> None:
    msg = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
           "latest NVIDIA driver is installed and running.\n")
    assert gpu.parse_inventory(msg, 9, expectations()).reason == "driver_not_loaded"
    with pytest.raises(ParseError, match="exited 9"):
        gpu.parse_ecc(msg, 9, expectations())


def test_lost_gpu_is_critical() -> None:
    text = "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n"
    assert gpu.parse_inventory(text, 15, expectations()).reason == "gpu_lost"


def test_uncorrected_ecc_from_the_replay_variant_is_critical() -> None:
    outcome = gpu.parse_ecc(replay_text("h200x2-ecc-uncorrected", "nvidia-smi-q"), 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "ecc_uncorrected")
    assert outcome.evidence == ("00000000:00:06.0: 2 uncorrected",)


@pytest.mark.realdata
def test_ecc_disabled_is_critical_when_required() -> None:
    text = realdata(H200Q).replace("Current                                        : Enabled",
                                   "Current                                        : Disabled", 1)
    assert gpu.parse_ecc(text, 0, expectations()).reason == "ecc_disabled"
    assert gpu.parse_ecc(text, 0, expectations(gpu={"ecc_required": False})).status == OK


@pytest.mark.realdata
def test_real_pending_row_remap_on_the_a100_is_critical() -> None:
    exp = expectations(gpu={"count": 4, "model": "NVIDIA A100-SXM4-80GB"})
    outcome = gpu.parse_remapped_rows(realdata("nvidia-smi-q__thamada-gls__A100SXMx4.txt"), 0, exp)
    assert (outcome.status, outcome.reason, outcome.evidence) == (CRITICAL, "row_remap_pending",
                                                                   ("00000000:9E:00.0",))


@pytest.mark.realdata
def test_remap_failure_is_critical() -> None:
    text = realdata(H200Q).replace("Remapping Failure Occurred                     : No",
                                   "Remapping Failure Occurred                     : Yes", 1)
    assert gpu.parse_remapped_rows(text, 0, expectations()).reason == "row_remap_failure"


@pytest.mark.realdata
def test_thermal_slowdown_is_unhealthy_idle_is_not() -> None:
    text = realdata(H200Q)
    assert gpu.parse_clock_events(text, 0, expectations()).status == OK
    hot = re.sub(r"(HW Thermal Slowdown\s+: )Not Active", r"\1Active", text, count=1)
    outcome = gpu.parse_clock_events(hot, 0, expectations())
    assert (outcome.status, outcome.reason) == (WARN, "clock_slowdown")
    assert "HW Thermal Slowdown" in outcome.summary


@pytest.mark.realdata
def test_version_drift_is_named_and_no_pins_is_not_applicable() -> None:
    exp = expectations(gpu={"driver_version": "570.195.03", "vbios_versions": ["96.00.A5.00.01"]})
    outcome = gpu.parse_versions(realdata(H200Q), 0, exp)
    assert outcome.status == WARN
    assert "driver 580.159.04, site pins 570.195.03" in outcome.evidence
    unpinned = expectations(gpu={"driver_version": None, "cuda_version": None, "vbios_versions": []})
    assert gpu.parse_versions(realdata(H200Q), 0, unpinned).status == "not_applicable"


@pytest.mark.realdata
def test_fabric_not_registered_is_critical_on_nvswitch_hosts() -> None:
    text = re.sub(r"(    Fabric\n\s+State\s+: )Completed", r"\1In Progress", realdata(H200Q), count=1)
    assert gpu.parse_fabric_state(text, 0, expectations()).reason == "fabric_not_ready"


def test_a_gpu_without_ecc_counters_is_unknown_not_healthy() -> None:
    text = replay_text("h200x2-healthy", "nvidia-smi-q")
    head, sep, tail = text.partition("GPU 00000000:00:07.0")
    tail = re.sub(r"DRAM Uncorrectable(\s+): 0", r"DRAM Uncorrectable\1: N/A", tail)
    tail = re.sub(r"SRAM Uncorrectable (Parity|SEC-DED)(\s+): 0", r"SRAM Uncorrectable \1\2: N/A", tail)
    outcome = gpu.parse_ecc(head + sep + tail, 0, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "ecc_unreadable")


@pytest.mark.realdata
def test_healthy_a100_on_an_older_driver_is_healthy_and_the_right_model() -> None:
    # Before: gpu_ecc critical ecc_disabled (no "ECC Mode" key) and gpu_inventory warn unexpected_gpu.
    older = as_older_driver_prints_it(realdata("nvidia-smi-q__thamada-gls__A100SXMx4.txt"))
    exp = expectations(gpu={"count": 4, "model": "NVIDIA A100-SXM4-80GB"})
    ecc = gpu.parse_ecc(older, 0, exp)
    assert ecc.status == OK, ecc
    inventory = gpu.parse_inventory(older, 0, exp)
    assert inventory.status == OK, inventory
    assert inventory.summary == "4 x NVIDIA A100-SXM4-80GB (the driver names it A100-SXM4-80GB)"
    assert gpu.parse_inventory(older, 0, expectations(gpu={"count": 4, "model": "A100-SXM4-40GB"})).reason == (
        "unexpected_gpu")


@pytest.mark.realdata
def test_a_report_without_any_ecc_mode_is_unknown_not_disabled() -> None:
    text = re.sub(r"\n    ECC Mode\n\s+Current\s+: Enabled\n\s+Pending\s+: Enabled", "", realdata(H200Q))
    assert "ECC Mode" not in text
    outcome = gpu.parse_ecc(text, 0, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "ecc_mode_unreadable")
    assert outcome.evidence == ("00000000:00:06.0", "00000000:00:07.0") and outcome.remediation
