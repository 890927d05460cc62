"""A failure of the agent itself is exit 3 (unknown) with the reason, never 1 ("unhealthy but usable") or 2.

Issue 16: a non-UTF-8 `.rc` replay file and a config nested 100k deep crashed the agent with a traceback
(Python's exit 1, which reads as a verdict); out-of-range numbers such as `gpu.count: 1e30` must be refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tools.health.__main__ as cli
from tools.health.config import parse_config
from tools.health.errors import ConfigError
from tools.health.probe_run import ReplayRunner

from .conftest import REPLAY

ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPLAY / "expectations-h200x2.json"


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    return subprocess.run([sys.executable, "-m", "tools.health", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env, check=False)


def test_a_non_utf8_rc_file_is_unknown_not_a_crash(tmp_path: Path) -> None:
    replay = tmp_path / "replay"
    shutil.copytree(REPLAY / "h200x2-healthy", replay)
    (replay / "nvidia-smi-q.rc").write_bytes(b"\xff\xfe\n")
    done = _agent("--config", str(CONFIG), "--replay", str(replay), "--json")
    assert done.returncode == 3, done.stderr[-400:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "unknown"
    inventory = next(c for c in report["checks"] if c["check"] == "gpu_inventory")
    assert inventory["status"] == "unknown" and "nvidia-smi-q.rc" in inventory["summary"]


def test_a_config_nested_100k_deep_is_unknown_with_the_reason(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"gpu": ' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    done = _agent("--config", str(deep), "--json")
    assert done.returncode == 3, done.stderr[-400:]
    answer = json.loads(done.stdout)
    assert answer["verdict"] == "unknown" and "nested too deeply" in answer["problems"][0]
    assert "Traceback" not in done.stderr


def test_a_bad_command_line_is_unknown_not_critical() -> None:
    done = _agent("--level", "fast")  # --config missing: argparse alone would exit 2, "critical"
    assert done.returncode == 3 and "--config" in done.stderr


def test_any_crash_of_the_agent_is_unknown_with_its_reason(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*_a: Any, **_k: Any) -> dict[str, Any]:
        raise MemoryError("probe results too large")

    monkeypatch.setattr(ReplayRunner, "run_all", broken)
    rc = cli.main(["--config", str(CONFIG), "--replay", str(REPLAY / "h200x2-healthy"), "--json"])
    out = capsys.readouterr()
    assert rc == 3
    assert json.loads(out.out)["error"] == "agent_error"
    assert "MemoryError: probe results too large" in out.err


@pytest.mark.parametrize("path", [Path("/dev/zero")])
def test_a_config_that_is_not_a_regular_file_is_refused(path: Path) -> None:
    done = _agent("--config", str(path))
    assert done.returncode == 3 and "not a regular file" in done.stderr


MINIMAL: dict[str, Any] = {"gpu": {"count": 8, "model": "NVIDIA H100 80GB HBM3"}}
LONG = {"stress_tflops_floor": 600, "membw_floor_gbps": 3000, "allreduce_busbw_floor_gbps": 300}


def _with(section: str, key: str, value: object) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps({**MINIMAL, "long": LONG}))
    data.setdefault(section, {})[key] = value
    return data


OUT_OF_RANGE = [
    ("gpu", "count", 1e30), ("gpu", "count", 10**30), ("gpu", "count", 100), ("ib", "hca_count", 10**9),
    ("gpu", "pcie_width", 0), ("gpu", "nvlinks_per_gpu", 10**6),
    ("long", "stress_tflops_floor", float("nan")), ("long", "membw_floor_gbps", float("inf")),
    ("long", "stress_seconds", 1e30), ("long", "matmul_size", 10**6), ("long", "allreduce_iters", 10**12),
    ("long", "allreduce_sizes_mib", [10**9]), ("timeouts", "command_s", float("inf")),
    ("timeouts", "long_margin_s", -1), ("ib", "counter_max", {"symbol_error": -5}),
]


def test_out_of_range_values_are_refused_with_their_path() -> None:
    accepted = []
    for section, key, value in OUT_OF_RANGE:
        try:
            parse_config(_with(section, key, value))
        except ConfigError as exc:
            assert any(p.startswith(f"{section}.{key}") for p in exc.problems), exc.problems
        else:
            accepted.append(f"{section}.{key}={value!r}")
    assert accepted == []
    parse_config(_with("gpu", "count", 64))  # the bounds themselves are accepted
    parse_config(_with("long", "stress_seconds", 600.0))


@pytest.mark.parametrize(("only", "level"), [("nope", "fast"), ("gpu_stress", "fast"), ("gpu_ecc,typo", "all")])
def test_a_selection_of_no_known_check_is_unknown_not_ok(capsys: pytest.CaptureFixture[str], only: str,
                                                         level: str) -> None:
    # Before: `--only nope` ran nothing and reported "ok", exit 0.
    rc = cli.main(["--config", str(CONFIG), "--replay", str(REPLAY / "h200x2-healthy"), "--only", only,
                   "--level", level, "--json"])
    out = capsys.readouterr()
    assert rc == 3 and json.loads(out.out)["error"] == "usage"
    assert "--only" in out.err
