"""A process that imports the health agent once and forks a child per run: `python -m sim.sshhosts.zygote SOCKET`.

Starting Python and importing the agent costs ~0.25 s of CPU per run; 512 hosts doing that on a small
machine would measure the interpreter, not the fan-out. A forked child runs the agent's own `main()`
with the same arguments the command line gets, so the agent's code and output are exactly those of
`python3 -m tools.health`. Protocol: one JSON line {"argv": [...], "config": "..."} in, one JSON line
{"rc": N, "stdout": "...", "stderr": "..."} out, per connection.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socketserver
import sys
import tempfile
from pathlib import Path
from typing import Any

import tools.health.__main__ as agent_main
from sim.unixpath import socket_address


def run_agent(argv: list[str], config: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        handle.write(config)
        path = handle.name
    try:
        args = [a.replace("{config}", path) for a in argv]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = agent_main.main(args)
            except SystemExit as exc:  # argparse errors exit 2, like the command line
                rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.unlink(path)
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        request = json.loads(self.rfile.readline())
        try:
            reply = run_agent(list(request["argv"]), str(request["config"]))
        except Exception as exc:  # the child reports any crash the way a crashing process would
            reply = {"rc": 1, "stdout": "", "stderr": f"Traceback: {type(exc).__name__}: {exc}\n"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class _Server(socketserver.ForkingMixIn, socketserver.UnixStreamServer):
    max_children = 512
    block_on_close = False
    request_queue_size = 1024  # the default 5 refuses connections when many hosts ask at once


def main(argv: list[str]) -> int:
    socket_path = argv[0]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    parent = os.getppid()
    with socket_address(Path(socket_path)) as address:
        server = _Server(address, _Handler)
    with server:
        server.timeout = 0.2  # handle_request returns (and reaps children) at least this often
        # Serve while the SSH host server that started us lives: killed with SIGKILL, it cannot stop us,
        # and an orphaned zygote would outlive the lab.
        while os.getppid() == parent:
            server.handle_request()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
