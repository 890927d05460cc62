"""The faults file's agent_output:, delay_s: and endpoint: hang on a test host act on the health agent (sim/testhosts/agent_faults.py).

The host's `python3` shim runs here against a stand-in agent package (`tools/health` printing a report), from the
directory the controller's command `cd`s to; about 1 s in all, no lab.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from sim.sshhosts.faults import EndpointFault, HostFaults, OutputFault
from sim.testhosts import agent_faults

REPORT = {"schema": 1, "checks": [{"name": "gpu_count", "status": "pass"}]}


def _agent(tmp_path: Path, faults: HostFaults, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    assert agent_faults.install(tmp_path / "root", faults)
    package = tmp_path / "opt" / "tools" / "health"
    package.mkdir(parents=True, exist_ok=True)
    (tmp_path / "opt" / "tools" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(f"import sys\nprint({json.dumps(json.dumps(REPORT))})\nsys.exit(3)\n")
    return subprocess.run(["sh", str(tmp_path / "root" / agent_faults.PROGRAM), *args], cwd=tmp_path / "opt",
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_a_host_without_these_faults_gets_no_shim(tmp_path: Path) -> None:
    assert not agent_faults.install(tmp_path, HostFaults(fixture="x"))
    assert not (tmp_path / agent_faults.PROGRAM).exists()


@pytest.mark.parametrize(("fault", "expected"), [
    (None, json.dumps(REPORT) + "\n"),
    (OutputFault.empty, ""),
    (OutputFault.truncated, (json.dumps(REPORT) + "\n")[: (len(json.dumps(REPORT)) + 1) // 2]),
    (OutputFault.garbled, "\x1b[31m" + (json.dumps(REPORT) + "\n")[::-1].replace('"', "\ufffd") + "\x00"),
], ids=["delay-only", "empty", "truncated", "garbled"])
def test_the_agents_report_reaches_the_controller_through_the_hosts_output_fault(
        tmp_path: Path, fault: OutputFault | None, expected: str) -> None:
    done = _agent(tmp_path, HostFaults(agent_output=fault, delay_s=0 if fault else 0.01), "-m", "tools.health")
    assert done.stdout == expected and done.returncode == 3, done.stderr  # the agent's own exit status


def test_a_slow_host_starts_the_agent_late_and_other_python_runs_untouched(tmp_path: Path) -> None:
    started = time.monotonic()
    done = _agent(tmp_path, HostFaults(delay_s=0.5), "-m", "tools.health")
    assert time.monotonic() - started >= 0.5 and json.loads(done.stdout) == REPORT
    started = time.monotonic()
    other = subprocess.run(["sh", str(tmp_path / "root" / agent_faults.PROGRAM), "-c", "print(6 * 7)"],
                           capture_output=True, text=True, timeout=20, check=False)
    assert other.stdout == "42\n" and time.monotonic() - started < 10


def test_a_flooding_agent_prints_without_end(tmp_path: Path) -> None:
    assert agent_faults.install(tmp_path / "root", HostFaults(agent_output=OutputFault.flood))
    with subprocess.Popen(["sh", str(tmp_path / "root" / agent_faults.PROGRAM), "-m", "tools.health"],
                          stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        chunk = proc.stdout.read(1 << 20)
        assert len(chunk) == 1 << 20 and set(chunk) == {ord("x"), ord("\n")} and proc.poll() is None
        proc.kill()


def test_a_hanging_endpoint_never_answers_the_agents_command_but_runs_other_python(tmp_path: Path) -> None:
    assert agent_faults.install(tmp_path / "root", HostFaults(endpoint=EndpointFault.hang))
    with pytest.raises(subprocess.TimeoutExpired) as hung:
        _agent(tmp_path, HostFaults(endpoint=EndpointFault.hang), "-m", "tools.health", timeout=1.5)
    assert not hung.value.stdout  # not a byte before the timeout
    other = subprocess.run(["sh", str(tmp_path / "root" / agent_faults.PROGRAM), "-c", "print(6 * 7)"],
                           capture_output=True, text=True, timeout=20, check=False)
    assert other.stdout == "42\n"
