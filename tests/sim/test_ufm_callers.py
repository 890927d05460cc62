"""The simulated UFM's `kill` fault finds the process that sent a request from the peer address alone
(sim/ufm/callers.py: the kernel's socket table in /proc/net/tcp, proc(5), and /proc/<pid>/fd links)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from sim.ufm.callers import caller_pid, kill_caller

CLIENT = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"x")
time.sleep(30)
"""


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_the_process_behind_a_connection_is_found_and_killed(family: str) -> None:
    address = "127.0.0.1" if family == "ipv4" else "::1"
    kind = socket.AF_INET if family == "ipv4" else socket.AF_INET6
    with socket.socket(kind, socket.SOCK_STREAM) as server:
        try:
            server.bind((address, 0))
        except OSError:
            pytest.skip(f"no {family} loopback here")
        server.listen(1)
        script = CLIENT.replace('"127.0.0.1"', repr(address))
        child = subprocess.Popen([sys.executable, "-c", script, str(server.getsockname()[1])])
        try:
            server.settimeout(10)
            conn, peer = server.accept()
            with conn:
                conn.recv(1)
                assert caller_pid(peer[:2]) == child.pid
                assert caller_pid((address, 1)) is None  # no socket from there
                assert kill_caller(peer[:2]) == child.pid
                assert child.wait(10) == -9
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(5)
