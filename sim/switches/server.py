"""One process serving every simulated management switch over SSH (asyncssh), one loopback address each.

Each switch has its NOS's prompt, answers (sim/switches/render.py), and paging: until `terminal length 0`
its output stops every 24 lines at `--More--` as a real one does. Faults, one per switch at most:
`refuse_login` (every password refused), `hang` (half of the MAC table, then nothing, never a prompt),
`page` (pages even after `terminal length 0`), `unknown_format` (answers a different table),
`lldp_disabled` (the LLDP command is unknown, as on NX-OS without `feature lldp`; the rest answers),
`late_prompts` (three prompts of earlier lines arrive after the first command's echo, before its answer:
what a loaded switch or controller showed in a bench run's session log).
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
from sim.switches.render import PAGE_LINES, SimPort, SimSwitch, answer, pager, prompt

MAX_LINE = 4096
IDLE_S = 300.0


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


async def _write_paged(proc: asyncssh.SSHServerProcess[str], text: str, paging: bool, more: str) -> bool:
    """Write `text`, stopping at `more` every PAGE_LINES lines while paging; False if the client went away."""
    lines = text.splitlines(keepends=True)
    while lines:
        chunk, lines = (lines[:PAGE_LINES], lines[PAGE_LINES:]) if paging else (lines, [])
        proc.stdout.write("".join(chunk).replace("\n", "\r\n"))
        if lines:
            proc.stdout.write(more)
            key = await asyncio.wait_for(proc.stdin.read(1), IDLE_S)
            proc.stdout.write("\r        \r")
            if not key or key in "qQ":
                return bool(key)
    return True


async def _shell(proc: asyncssh.SSHServerProcess[str], sw: SimSwitch, user: str) -> None:
    paging = sw.platform != "sonic" or sw.fault == "page"  # SONiC's shell pages nothing (but `page`: as `more`)
    try:
        proc.stdout.write(f"\r\n{prompt(sw, user)}")
        while True:
            line = await asyncio.wait_for(proc.stdin.readline(), IDLE_S)
            if not line or len(line) > MAX_LINE:
                break
            command = line.strip()
            if command == "exit":
                break
            if command == "terminal length 0" and sw.fault != "page":
                paging = False
            text = answer(sw, command)
            if command.startswith("show mac") and sw.fault == "late_prompts":  # the session's Enters, answered late
                proc.stdout.write(prompt(sw, user) * 3)
            if command.startswith("show mac") and sw.fault == "hang":
                proc.stdout.write(text[: len(text) // 2].replace("\n", "\r\n"))
                await asyncio.sleep(IDLE_S)
                break
            if command.startswith("show lldp") and sw.fault == "lldp_disabled":  # NX-OS without `feature lldp`
                text = answer(sw, "show lldp (feature disabled)")
            if command.startswith("show") and sw.fault == "unknown_format":
                text = "Syntax error: Illegal parameter\n"
            if not await _write_paged(proc, text, paging, pager(sw)):
                break
            proc.stdout.write(prompt(sw, user))
    except (TimeoutError, asyncssh.Error, BrokenPipeError, ConnectionError):
        pass
    finally:
        proc.exit(0)


async def serve(switches: list[SimSwitch], username: str, password: str,
                ready: Callable[[], None] | None = None) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    servers = []
    for sw in switches:
        servers.append(await asyncssh.create_server(
            lambda sw=sw: _Auth(sw, username, password), sw.address, sw.port, server_host_keys=[key],
            process_factory=lambda proc, sw=sw: _shell(proc, sw, username), encoding="utf-8", line_editor=True,
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
