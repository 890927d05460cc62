"""Running probes for real: timeouts that kill the whole process group, missing tools, the C locale,
replay files and recording."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tools.health import agent
from tools.health.outcome import UNKNOWN
from tools.health.probe_run import LiveRunner, ReplayRunner, record, run_command
from tools.health.probes import PROBE_ERROR, TIMEOUT, TOOL_MISSING, Probe, ProbeResult

from .conftest import REPLAY, REPO, expectations


def test_command_runs_in_the_c_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    result = run_command(Probe("env", (sys.executable, "-c", "import os; print(os.environ['LC_ALL'])")))
    assert (result.output, result.rc, result.ran) == ("C\n", 0, True)


def test_missing_tool_is_a_failure_not_an_output() -> None:
    result = run_command(Probe("x", ("no-such-tool-bringup",)))
    assert (result.ran, result.failure_kind) == (False, TOOL_MISSING)


def test_hung_tool_and_its_children_are_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {marker}; wait"
    t0 = time.monotonic()
    result = run_command(Probe("hang", ("sh", "-c", script), timeout_s=0.5))
    assert time.monotonic() - t0 < 10
    assert (result.ran, result.failure_kind) == (False, TIMEOUT)
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the hung tool's child outlived the timeout")


def test_collector_that_never_returns_is_a_timeout() -> None:
    wedged = threading.Event()

    def blocked_read(_root: Path) -> tuple[str, int]:
        wedged.wait(10)  # a read of a wedged HCA's sysfs file (bounded, so a regression fails, not hangs)
        return "", 0

    t0 = time.monotonic()
    try:
        result = LiveRunner().run(Probe("ib-sysfs", collect=blocked_read, timeout_s=0.3))
    finally:
        wedged.set()
    assert time.monotonic() - t0 < 5
    assert (result.ran, result.failure_kind) == (False, TIMEOUT)
    assert result.failure == "read of ib-sysfs (in-process) did not finish within 0.3 s"


def test_agent_process_exits_although_a_collector_never_returns() -> None:
    script = (
        "import threading\n"
        "from tools.health.probes import Probe\n"
        "from tools.health.probe_run import LiveRunner\n"
        "def blocked(_root): threading.Event().wait()\n"
        "probes = [Probe('wedged', collect=blocked, timeout_s=0.3), Probe('fine', collect=lambda r: ('x\\n', 0))]\n"
        "results = LiveRunner().run_all(probes, parallel=True)\n"
        "print(results['wedged'].failure_kind, results['fine'].output.strip())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "timeout x\n"), done.stderr


def test_collector_error_is_a_failure() -> None:
    def broken(_root: Path) -> tuple[str, int]:
        raise PermissionError("denied")

    result = LiveRunner().run(Probe("b", collect=broken))
    assert (result.ran, result.failure_kind) == (False, PROBE_ERROR)


def test_replay_rc_files(tmp_path: Path) -> None:
    (tmp_path / "a.out").write_text("x\n")
    (tmp_path / "b.out").write_text("probe/capture.sh: line 4: zpool: command not found\n")
    (tmp_path / "b.rc").write_text("127\n")
    (tmp_path / "c.out").write_text("")
    (tmp_path / "c.rc").write_text("timeout\n")
    (tmp_path / "d.out").write_text("")
    (tmp_path / "d.rc").write_text("seven\n")
    runner = ReplayRunner(tmp_path)
    assert runner.run(Probe("a", ("a",))) == ProbeResult("a", "x\n", 0)
    assert runner.run(Probe("b", ("b",))).failure_kind == TOOL_MISSING
    assert runner.run(Probe("c", ("c",))).failure_kind == TIMEOUT
    assert runner.run(Probe("d", ("d",))).failure_kind == PROBE_ERROR
    assert runner.run(Probe("e", ("e",))).failure_kind == TOOL_MISSING


def test_record_then_replay_gives_the_same_verdicts(tmp_path: Path) -> None:
    exp = expectations()
    first = agent.run(exp, ReplayRunner(REPLAY / "h200x2-healthy"), "all", record_dir=tmp_path / "rec")
    again = agent.run(exp, ReplayRunner(tmp_path / "rec"), "all")
    assert [o.as_dict() for o in first.outcomes] == [o.as_dict() for o in again.outcomes]


def test_record_writes_failures_in_the_replay_layout(tmp_path: Path) -> None:
    from tools.health.probes import failed

    record({"gone": failed("gone", TOOL_MISSING, "absent"), "slow": failed("slow", TIMEOUT, "late", "part")},
           tmp_path)
    assert not (tmp_path / "gone.out").exists()
    assert (tmp_path / "slow.rc").read_text() == "timeout\n"


def _tool(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_live_host_with_a_hanging_nvidia_smi_and_no_other_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(bindir, "nvidia-smi", f"exec {shutil.which('sleep')} 30")
    monkeypatch.setenv("PATH", str(bindir))
    exp = expectations(timeouts={"command_s": 0.5})
    t0 = time.monotonic()
    report = agent.run(exp, LiveRunner(root=tmp_path), "fast")
    assert time.monotonic() - t0 < 10
    by = {o.check: o for o in report.outcomes}
    assert by["gpu_inventory"].reason == TIMEOUT and "did not finish within 0.5 s" in by["gpu_inventory"].summary
    assert by["gpu_xid"].status == UNKNOWN  # no dmesg, no journalctl on this PATH
    assert by["disk_usage"].reason == TOOL_MISSING
    # /proc and /sys under an empty root: the readers fail or find nothing, never "ok" for the GPUs
    assert by["pcie_links"].status != "ok"
    assert report.exit_code in (2, 3)
