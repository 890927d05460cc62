"""ib_write_bw's report read from the real perftest captures and from the simulated hosts' stand-in; anything
that is not a report (early exit, garbage, runaway output, another device) is unknown, never a rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.burnin.perftest import BwResult, BwUnknown, client_command, parse_bw, server_command
from sim.sshhosts.perftest_sim import parse_invocation, report

PERF = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata" / "5_perf"


def _capture(prefix: str) -> str:
    found = sorted(PERF.glob(f"{prefix}*.txt")) if PERF.is_dir() else []
    if not found:
        pytest.skip("realdata/5_perf is not checked out here")
    return found[0].read_text()


def test_the_real_ib_write_bw_capture_reads_as_its_average() -> None:
    got = parse_bw(_capture("ib_write_bw__"), 0, "mlx5_5")
    assert got == BwResult(98.01, 98.01, 65536, 20000, "mlx5_5")


def test_a_report_for_another_device_or_a_failed_run_is_unknown() -> None:
    text = _capture("ib_write_bw__")
    assert isinstance(parse_bw(text, 0, "mlx5_0"), BwUnknown)
    assert "exited with 1" in parse_bw(text, 1).reason  # type: ignore[union-attr]
    assert isinstance(parse_bw("Couldn't connect to gpu-2:18515\n", 0), BwUnknown)
    assert isinstance(parse_bw(text.replace("98.01 ", "9\x008.01 "), 0), BwUnknown)
    assert isinstance(parse_bw("x" * 70_000, 0), BwUnknown)


def test_the_stand_in_prints_what_the_parser_reads_and_understands_the_runners_commands() -> None:
    server = parse_invocation(server_command("mlx5_3", 1, 18516, 5, 1, 40))
    client = parse_invocation(client_command("mlx5_2", 1, 18516, 5, None, "gpu-r1-02", 35))
    assert server is not None and server.server is None and server.gpu == 1 and server.cut_at == 40
    assert client is not None and client.server == "gpu-r1-02" and client.tcp_port == 18516 and client.hca == "mlx5_2"
    assert parse_bw(report(client, 196.4, 12, 34, 5), 0, "mlx5_2") == BwResult(196.4, 0.0, 65536, 1873016, "mlx5_2")  # 196.4e9 * 5 / (65536 * 8)
    assert parse_invocation("echo ib_write_bw") is None
