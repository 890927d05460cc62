"""The one infiniband-diags runner (fabric/toolrun.py): a deadline that kills the tool's whole process group, a
cap on what it may print, a scratch directory it cannot litter, and a bounded stderr tail. The stand-in tools
are shell scripts: a wrapper that starts the real tool as a child (as a site's prefix may), a tool that prints
forever, one that writes into its working directory as ibsim's libumad stand-in does (`./sys-<pid>`)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from fabric.toolrun import STDERR_TAIL, ToolOutputTooLarge, run_tool
from tests.processes import gone_within


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_tool_past_its_deadline_is_killed_with_every_process_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "child.pid"
    wrapper = _script(tmp_path, "wrapper", f"sleep 30 & echo $! > {pids}\nwait\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_tool([wrapper], {}, 0.5)
    assert time.monotonic() - started < 5
    assert gone_within(int(pids.read_text()), 3)


def test_a_tool_printing_past_the_cap_is_killed_and_nothing_it_printed_is_used(tmp_path: Path) -> None:
    chatty = _script(tmp_path, "chatty", "exec yes bringup\n")
    started = time.monotonic()
    with pytest.raises(ToolOutputTooLarge, match="printed more than its cap of 65536 bytes"):
        run_tool([chatty], {}, 30, max_output=65536)
    assert time.monotonic() - started < 5


def test_what_a_tool_leaves_in_its_working_directory_goes_with_it_even_when_killed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    litter = _script(tmp_path, "litter", "mkdir sys-$$; pwd; sleep ${1:-0}\n")
    done = run_tool([litter], {}, 10)
    scratch = Path(done.stdout.strip())
    assert done.returncode == 0 and scratch != caller and not scratch.exists()
    with pytest.raises(subprocess.TimeoutExpired):
        run_tool([litter, "30"], {}, 0.5)
    assert list(caller.iterdir()) == []


def test_stderr_keeps_only_its_tail_and_the_exit_status_and_environment_are_the_tools(tmp_path: Path) -> None:
    noisy = _script(tmp_path, "noisy", 'yes warning | head -c 1000000 >&2; echo "last: $ASKED" >&2; echo out; '
                                       "exit 3\n")
    proc = run_tool([noisy], {"ASKED": "value"}, 10)
    assert (proc.returncode, proc.stdout) == (3, "out\n")
    assert len(proc.stderr) <= STDERR_TAIL and proc.stderr.endswith("last: value\n")


def test_a_missing_tool_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_tool([str(tmp_path / "no-such-tool")], {}, 5)
