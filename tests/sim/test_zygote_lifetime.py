"""The SSH hosts' agent zygote never outlives the server that started it (no orphan after a SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.processes import alive, gone_within

REPO = Path(__file__).resolve().parents[2]

# A stand-in for the SSH host server: starts the zygote, prints its pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-m", "sim.sshhosts.zygote", sys.argv[1]], stdin=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_the_zygote_exits_when_its_server_is_killed(tmp_path: Path) -> None:
    sock = tmp_path / "zygote.sock"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(sock)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    zygote = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists() and alive(zygote)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert gone_within(zygote, 10)  # a zombie waiting for init to reap it counts as gone
    finally:
        if alive(zygote):
            os.kill(zygote, signal.SIGKILL)
