"""A test host's `ib_write_bw`: a thin client of the lab's perftest simulator (sim/testhosts/perftest_service.py).

The host has no HCA, so its `ib_write_bw` (in /usr/local/sbin, present once DOCA-OFED, which brings perftest,
is installed) sends its arguments and the host's name to the simulator and prints what perftest would have:
the simulator runs the flow over the site's simulated fabric (ibsim's real LFTs, the link faults) as the
SSH-host simulator does (sim/sshhosts/perftest_sim.py). The process is a real process on the host, so
`timeout -k K T ib_write_bw ...` and `pkill -f 'ib_write_bw .*-p PORT'` act on it as on a real one: the
connection closes and the simulator ends the flow.
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "etc/bringup-sim/perftest"  # "address port" of the simulator, relative to the host's root
PROGRAM = "usr/local/sbin/ib_write_bw"
PACKAGE = "doca-ofed"  # DOCA-OFED's meta package depends on perftest

_CLIENT = '''#!/usr/bin/python3
"""ib_write_bw of a bringup test host: the lab's perftest simulator runs the flow (sim/testhosts/perftest_client.py)."""
import json
import socket
import subprocess
import sys

LIMIT = 4 * 1024 * 1024


def installed():
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${{db:Status-Abbrev}}", "{package}"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.startswith("ii")


def main():
    if not installed():
        print("sh: 1: ib_write_bw: not found", file=sys.stderr)
        return 127
    with open("/{config}", encoding="utf-8") as handle:
        address, port = handle.read().split()[:2]
    try:
        conn = socket.create_connection((address, int(port)), timeout=10)
    except OSError as exc:
        print(f" Couldn't get device attributes: the perftest simulator does not answer ({{exc}})", file=sys.stderr)
        return 1
    conn.settimeout(None)
    conn.sendall((json.dumps({{"host": socket.gethostname(), "argv": sys.argv[1:]}}) + "\\n").encode())
    data = b""
    while len(data) < LIMIT:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    if not data.strip():
        print(" Connection to the peer lost", file=sys.stderr)
        return 255
    answer = json.loads(data)
    sys.stdout.write(answer["out"])
    sys.stderr.write(answer["err"])
    return int(answer["rc"])


sys.exit(main())
'''


def client() -> str:
    return _CLIENT.format(package=PACKAGE, config=CONFIG)


def install(root: Path, endpoint: str) -> None:
    """The client and the simulator's `address port` on the host."""
    program = root / PROGRAM
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(client())
    program.chmod(0o755)
    config = root / CONFIG
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(endpoint.replace(":", " ") + "\n")
