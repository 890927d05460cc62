"""Xid, SXid, 'PCIe bandwidth limited' and unexpected-line checks on real kernel logs."""

from __future__ import annotations

import pytest

from tools.health.errors import ParseError
from tools.health.kernel_log import (
    evaluate_unexpected,
    judge_pcie_limited,
    judge_sxid,
    judge_xid,
    parse_kernel_log,
)
from tools.health.outcome import CRITICAL, OK, UNKNOWN, WARN
from tools.health.probes import ProbeResult, failed

from .conftest import expectations, realdata, replay_text


def judge(judge_fn, text: str, **overrides):  # type: ignore[no-untyped-def]
    return judge_fn(parse_kernel_log(text), "dmesg", expectations(**overrides))


@pytest.mark.realdata
def test_xid_94_in_a_real_h100_log_is_critical_and_application_xids_are_not() -> None:
    outcome = judge(judge_xid, realdata("dmesg-xid__akash-network-support-issue244__H100-Xid43-31-94.txt"))
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_94")


@pytest.mark.realdata
def test_xid_119_gsp_timeout_is_critical() -> None:
    outcome = judge(judge_xid, realdata("dmesg-xid119__leptonai-gpud__xid_testdata_dmesg-with-xid-119.log"))
    assert outcome.reason == "xid_119"


THREADS = "dmesg-xid-sxid__misc-github-threads__Xid13-109-45-SXid12028-fallen-off-bus.txt"


def _thread_block(text: str, source: str) -> str:
    """One block of the compiled-threads capture: the lines under its '# --- <source>' heading."""
    block = text.split(f"# --- {source}", 1)[1].split("\n# --- ", 1)[0]
    return block.split("\n", 1)[1]


@pytest.mark.realdata
def test_fallen_off_the_bus_without_an_xid_line_is_critical() -> None:
    outcome = judge(judge_xid, _thread_block(realdata(THREADS), "NVIDIA/NVSentinel issue #155"))
    assert (outcome.status, outcome.reason) == (CRITICAL, "gpu_fallen_off_bus")


@pytest.mark.realdata
def test_application_xids_alone_are_reported_but_pass() -> None:
    text = realdata(THREADS)
    only_xid_lines = "".join(line + "\n" for line in text.splitlines()
                             if "Xid (" in line and "SXid" not in line and "caused by previous" not in line)
    outcome = judge(judge_xid, only_xid_lines)
    assert outcome.status == OK and "13, 109" in outcome.summary


@pytest.mark.realdata
def test_xid_45_caused_by_a_previous_nvlink_xid_whose_line_is_gone_is_critical() -> None:
    # The B200 node of NVIDIA/open-gpu-kernel-modules#1150: only the Xid 45 teardown lines name Xid 145 and 149.
    block = _thread_block(realdata(THREADS), "NVIDIA/open-gpu-kernel-modules issue #1150")
    outcome = judge(judge_xid, block)
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_145_149")
    assert outcome.evidence[0].endswith("Ch 00000001 caused by previous Xid 149")


def test_xid_45_caused_by_an_application_xid_is_not_hardware() -> None:
    text = "[ 5.0] NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 13\n"
    assert judge(judge_xid, text).status == OK


# Line forms: TensorRT-LLM#4816 (B200, "145, RLW_REMAP Nonfatal XC0 i0 Link 02"), NVIDIA's catalogue text for
# Xid 154 ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)").
NONFATAL_145 = "[ 7.1] NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02\n"
FATAL_149 = "[ 7.2] NVRM: Xid (PCI:0000:5f:00): 149, NETIR_LINK_EVT Fatal Link 00 (0x016415c6)\n"


def _action(pci: str, to: str) -> str:
    return f"[ 7.3] NVRM: Xid (PCI:{pci}): 154, GPU recovery action changed from 0x0 (None) to {to}\n"


def test_nonfatal_nvlink_xid_is_unhealthy_and_a_fatal_one_critical() -> None:
    outcome = judge(judge_xid, NONFATAL_145)
    assert (outcome.status, outcome.reason) == (WARN, "xid_145_nonfatal")
    outcome = judge(judge_xid, NONFATAL_145 + FATAL_149)
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_149")


def test_xid_154_is_judged_by_the_recovery_action_it_names() -> None:
    for to in ("0x1 (GPU Reset Required)", "0x2 (Node Reboot Required)", "0x4 (Drain and Reset)", "0x1 (PF FLR)"):
        outcome = judge(judge_xid, NONFATAL_145 + _action("0000:5f:00", to))
        assert (outcome.status, outcome.reason) == (CRITICAL, "xid_154"), to
    assert judge(judge_xid, _action("0000:5f:00", "0x0 (None)")).status == OK
    # The last change per GPU is the action wanted now: back to None, nothing to do.
    cleared = _action("0000:5f:00", "0x3 (Drain P2P)") + _action("0000:5f:00", "0x0 (None)").replace(
        "from 0x0 (None)", "from 0x3 (Drain P2P)")
    assert judge(judge_xid, cleared).status == OK
    other_gpu = _action("0000:5f:00", "0x2 (Node Reboot Required)") + _action("0000:6a:00", "0x0 (None)")
    assert judge(judge_xid, other_gpu).status == CRITICAL


def test_catalogue_hardware_xids_after_125_are_critical() -> None:
    for xid in (140, 143, 146, 150):
        text = f"[ 8.0] NVRM: Xid (PCI:0000:5f:00): {xid}, pid=1, name=x, hardware fault\n"
        assert judge(judge_xid, text).reason == f"xid_{xid}"


@pytest.mark.realdata
def test_lent_h200_boot_log_has_no_xid() -> None:
    assert judge(judge_xid, realdata("h200x2-captured-2026-11-29/dmesg.txt")).status == OK
    assert judge(judge_xid, realdata("h200x2-captured-2026-11-29/dmesg-T.txt")).status == OK


def test_xid_79_replay_variant_is_critical() -> None:
    outcome = judge(judge_xid, replay_text("h200x2-xid79", "dmesg"))
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_79")


@pytest.mark.realdata
def test_non_fatal_sxid_is_unhealthy_unless_expected() -> None:
    text = realdata("dmesg-sxid__NVIDIA-nvtrust-issue124__HGX-H100-SXid22013.txt")
    outcome = judge(judge_sxid, text)
    assert (outcome.status, outcome.reason) == (WARN, "sxid_22013")
    assert judge(judge_sxid, text, kernel_log={"sxid_expected": [22013]}).status == OK


def test_fatal_sxid_is_critical() -> None:
    text = ("[  38.1] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 12 egress non-posted PRIV error\n"
            "[  38.2] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Severity 5 Engine instance 12\n")
    assert judge(judge_sxid, text).status == CRITICAL


def test_pcie_bandwidth_limited_line_from_mlx5_is_flagged() -> None:
    text = ("kern  :info  : [    3.1] mlx5_core 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth, limited by "
            "16.0 GT/s PCIe x8 link at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n")
    outcome = judge(judge_pcie_limited, text)
    assert (outcome.status, outcome.reason) == (WARN, "pcie_bandwidth_limited") and "mlx5" in outcome.summary
    assert judge(judge_pcie_limited, replay_text("h200x2-healthy", "dmesg")).status == OK


def _results(text: str) -> dict[str, ProbeResult]:
    return {"dmesg": ProbeResult("dmesg", text, 0), "journalctl-k": failed("journalctl-k", "tool_missing", "absent")}


def test_unexpected_lines_use_the_sites_list() -> None:
    text = replay_text("h200x2-healthy", "dmesg")
    assert evaluate_unexpected(_results(text), expectations()).status == OK
    no_list = evaluate_unexpected(_results(text), expectations(kernel_log={"expected_patterns": []}))
    assert no_list.status == WARN and no_list.metrics == (("kernel_log_unexpected_lines", 6.0),)
    new_fault = text + "kern  :err   : [ 9.9] mce: [Hardware Error]: Machine check events logged\n"
    outcome = evaluate_unexpected(_results(new_fault), expectations())
    assert outcome.evidence == ("err: mce: [Hardware Error]: Machine check events logged",)


@pytest.mark.realdata
def test_log_without_levels_cannot_be_judged_for_unexpected_lines() -> None:
    outcome = evaluate_unexpected(_results(realdata("h200x2-captured-2026-11-29/dmesg.txt")), expectations())
    assert outcome.status == UNKNOWN


def test_garbled_and_empty_logs_are_refused() -> None:
    with pytest.raises(ParseError, match="empty"):
        parse_kernel_log("\n\n")
    with pytest.raises(ParseError, match="look like kernel log lines"):
        parse_kernel_log("\x00\x13garbage\nmore garbage\n")


def test_journal_is_read_when_dmesg_is_refused() -> None:
    from tools.health.kernel_log import from_log

    journal = ("Nov 29 22:13:05 node7 kernel: NVRM: Xid (PCI:0000:00:07): 79, pid='<unknown>', name=<unknown>, "
               "GPU has fallen off the bus.\n")
    results = {"dmesg": ProbeResult("dmesg", "dmesg: read kernel buffer failed: Operation not permitted\n", 1),
               "journalctl-k": ProbeResult("journalctl-k", journal, 0)}
    outcome = from_log("gpu_xid", judge_xid)(results, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_79") and "(journalctl-k)" in outcome.summary
    neither = {"dmesg": results["dmesg"], "journalctl-k": failed("journalctl-k", "tool_missing", "absent")}
    outcome = from_log("gpu_xid", judge_xid)(neither, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "probe_failed")


def test_journal_is_read_before_dmesg_whose_ring_buffer_may_have_wrapped() -> None:
    from tools.health.kernel_log import from_log

    # On a busy node the ring buffer dmesg reads no longer holds the early Xid 79; the journal holds the boot.
    wrapped = replay_text("h200x2-healthy", "dmesg")
    journal = ("Nov 29 22:13:05 node7 kernel: NVRM: Xid (PCI:0000:00:07): 79, pid='<unknown>', name=<unknown>, "
               "GPU has fallen off the bus.\n"
               "Nov 29 23:40:00 node7 kernel: nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 12\n"
               "Nov 29 23:41:00 node7 kernel: mlx5_core 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth, "
               "limited by 16.0 GT/s PCIe x8 link at 0000:3a:00.0\n")
    results = {"dmesg": ProbeResult("dmesg", wrapped, 0), "journalctl-k": ProbeResult("journalctl-k", journal, 0)}
    outcome = from_log("gpu_xid", judge_xid)(results, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_79") and "(journalctl-k)" in outcome.summary
    assert from_log("nvswitch_sxid", judge_sxid)(results, expectations()).status == CRITICAL
    assert from_log("pcie_bandwidth_limited", judge_pcie_limited)(results, expectations()).status == WARN
    # The unexpected-lines check needs dmesg's levels and keeps reading dmesg.
    assert evaluate_unexpected(results, expectations()).status == OK


def test_dmesg_is_read_when_the_journal_has_nothing_for_this_boot() -> None:
    from tools.health.kernel_log import from_log

    results = {"dmesg": ProbeResult("dmesg", replay_text("h200x2-xid79", "dmesg"), 0),
               "journalctl-k": ProbeResult("journalctl-k", "", 0)}
    outcome = from_log("gpu_xid", judge_xid)(results, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "xid_79") and "(dmesg)" in outcome.summary
