"""One process serving every simulated management switch over SSH (asyncssh), one loopback address each.

Each session is the NOS's CLI on a pseudo-terminal (sim/switches/session.py, terminal.py): its prompts and
modes, one prompt per line read, paging until `terminal length 0`, answers from sim/switches/render.py.
Faults, one per switch at most:
`refuse_login` (every password refused), `hang` (half of the MAC table, then nothing, never a prompt),
`page` (pages even after `terminal length 0`), `unknown_format` (answers a different table),
`lldp_disabled` (the LLDP command is unknown, as on NX-OS without `feature lldp`; the rest answers),
`falls_behind` (each line keeps the CLI busy for a while, and what arrives meanwhile is echoed at once by the
pseudo-terminal and again after the next prompt: a loaded NX-OS or EOS, as netmiko's drivers describe it).
The password is read from the environment variable the as-built file names, never from argv.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh

from sim.addresses import check_loopback
from sim.switches.model import SimPort, SimSwitch
from sim.switches.session import run_session


def switches_from(asbuilt: dict[str, Any]) -> list[SimSwitch]:
    """The as-built data's switches (sim/switches/asbuilt.py writes it), loopback addresses only."""
    return [SimSwitch(s["name"], s["platform"], check_loopback(s["address"]), int(s["port"]),
                      [SimPort(p["name"], p["status"], int(p["vlan"]), [(m, int(v)) for m, v in p["macs"]],
                               [(str(n), str(i), str(c)) for n, i, c in p.get("lldp", [])])
                       for p in s["ports"]], s.get("fault", ""))
            for s in asbuilt["switches"]]


def load_asbuilt(path: Path) -> tuple[list[SimSwitch], str, str]:
    """(switches, username, name of the password's environment variable) from the as-built JSON."""
    data = json.loads(path.read_text())
    return switches_from(data), data["username"], data["password_env"]


class _Auth(asyncssh.SSHServer):
    def __init__(self, sw: SimSwitch, username: str, password: str) -> None:
        self.sw, self.username, self.password = sw, username, password

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        if self.sw.fault == "refuse_login":
            return False
        return username == self.username and hmac.compare_digest(password.encode(), self.password.encode())


async def serve(switches: list[SimSwitch], username: str, password: str,
                ready: Callable[[], None] | None = None) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    servers = []
    for sw in switches:
        servers.append(await asyncssh.create_server(
            lambda sw=sw: _Auth(sw, username, password), sw.address, sw.port, server_host_keys=[key],
            process_factory=lambda proc, sw=sw: run_session(proc, sw, username, password), encoding="utf-8",
            line_editor=False,
            login_timeout=30, keepalive_interval=0))
    if ready is not None:
        ready()
    try:
        await asyncio.Event().wait()
    finally:
        for s in servers:
            s.close()


def main(asbuilt: Path) -> None:
    switches, username, env = load_asbuilt(asbuilt)
    password = os.environ.get(env, "")
    if not password:
        raise SystemExit(f"sim switches: set {env} (the switches' password is never given on argv)")
    asyncio.run(serve(switches, username, password))
