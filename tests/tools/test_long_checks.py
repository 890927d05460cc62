"""Long checks without a GPU: the arithmetic, the verdicts on the lent H200's results, and PyTorch missing."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tools.health import agent, long_checks
from tools.health.long_math import busbw_gbps, copy_gbps, digests_agree, matmul_tflops, timeline
from tools.health.outcome import CRITICAL, OK, UNKNOWN, WARN
from tools.health.probe_run import LiveRunner

from .conftest import REPO, expectations, replay_text


def test_arithmetic() -> None:
    assert matmul_tflops(8192, 1000, 1.0) == pytest.approx(1099.511627776)
    assert copy_gbps(2**30, 10, 1.0) == pytest.approx(21.47483648)
    # nccl-tests' bus bandwidth: algbw * 2(n-1)/n
    assert busbw_gbps(4 * 10**9, 0.01, 2) == pytest.approx(400.0)
    assert busbw_gbps(4 * 10**9, 0.01, 8) == pytest.approx(700.0)
    assert digests_agree(["a", "a"]) and not digests_agree(["a", "b"])
    assert timeline([1.0] * 10, 8192, 100, 5.0) == [pytest.approx(110.0, abs=0.1)] * 2
    with pytest.raises(ValueError):
        matmul_tflops(8192, 1, 0.0)


def test_lent_h200_results_against_floors() -> None:
    exp = expectations()  # floors: 630 TFLOP/s (95 % of the sustained rate), 3800 GB/s, 340 GB/s
    stress = long_checks.parse_stress(replay_text("h200x2-healthy", "long-stress"), 0, exp)
    assert stress.status == OK and "bit-identical" in stress.summary
    metrics = dict(stress.metrics)
    assert 600 < metrics["stress_tflops_gpu0"] < 700 and metrics["matmul_ceiling_tflops"] > 790
    assert long_checks.parse_membw(replay_text("h200x2-healthy", "long-membw"), 0, exp).status == OK
    allreduce = long_checks.parse_allreduce(replay_text("h200x2-healthy", "long-allreduce"), 0, exp)
    assert allreduce.status == OK and min(v for _, v in allreduce.metrics) >= 340


def test_stress_below_the_burst_floor_names_the_power_cap() -> None:
    outcome = long_checks.parse_stress(replay_text("h200x2-healthy", "long-stress"), 0,
                                       expectations(long={"stress_tflops_floor": 754}))
    assert (outcome.status, outcome.reason) == (WARN, "stress_tflops_low")
    assert "clock event reason was active under load" in outcome.summary
    assert any("Active" in e and "700.00 W" in e for e in outcome.evidence)


def _stress(mutate) -> str:  # type: ignore[no-untyped-def]
    data = json.loads(replay_text("h200x2-healthy", "long-stress"))
    mutate(data)
    return json.dumps(data) + "\n"


def test_a_gpu_computing_different_bits_is_critical() -> None:
    def flip(d: dict) -> None:  # type: ignore[type-arg]
        d["gpus"][1]["digest_end"] = "0" * 64

    outcome = long_checks.parse_stress(_stress(flip), 0, expectations())
    assert (outcome.status, outcome.reason) == (CRITICAL, "gpu_bit_mismatch")

    def drift(d: dict) -> None:  # type: ignore[type-arg]
        d["gpus"][0]["batches_consistent"] = False

    assert long_checks.parse_stress(_stress(drift), 0, expectations()).reason == "gpu_bit_mismatch"


def test_fewer_gpus_in_torch_than_expected_is_critical() -> None:
    def drop(d: dict) -> None:  # type: ignore[type-arg]
        d["gpus"] = d["gpus"][:1]

    assert long_checks.parse_stress(_stress(drop), 0, expectations()).reason == "missing_gpu"


def test_wrong_all_reduce_sum_and_low_busbw() -> None:
    data = json.loads(replay_text("h200x2-healthy", "long-allreduce"))
    data["results"][0]["correct"] = False
    assert long_checks.parse_allreduce(json.dumps(data) + "\n", 0, expectations()).reason == "allreduce_wrong"
    default_nccl = (REPO / "tests/fixtures/h200/reports/run1-long-default-nccl.json")
    run1 = {c["check"]: c for c in json.loads(default_nccl.read_text())["checks"]}
    assert run1["nccl_allreduce"]["status"] == WARN  # 329.7 GB/s at 1 GiB with NCCL's default channel count


def test_worker_failure_and_no_cuda_are_unknown() -> None:
    failed = '{"error": "worker_failed", "detail": "RuntimeError: CUDA error: an illegal memory access"}\n'
    outcome = long_checks.parse_stress("Traceback ...\n" + failed, 1, expectations())
    assert (outcome.status, outcome.reason) == (UNKNOWN, "worker_failed")
    no_cuda = '{"error": "no_cuda", "detail": "no_cuda: torch sees no CUDA device"}\n'
    assert long_checks.parse_allreduce(no_cuda, 3, expectations()).reason == "no_cuda"


def _python_without_site_packages(tmp_path: Path) -> str:
    wrapper = tmp_path / "python-no-torch"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n", encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def test_without_pytorch_every_long_check_is_unknown(tmp_path: Path) -> None:
    exp = expectations(long={"python": _python_without_site_packages(tmp_path), "stress_seconds": 1})
    report = agent.run(exp, LiveRunner(), "long")
    assert [(o.check, o.status, o.reason) for o in report.outcomes] == [
        ("gpu_stress", UNKNOWN, "torch_missing"),
        ("gpu_memory_bandwidth", UNKNOWN, "torch_missing"),
        ("nccl_allreduce", UNKNOWN, "torch_missing"),
    ]
    assert report.exit_code == 3
