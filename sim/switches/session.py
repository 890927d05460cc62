"""One SSH session's CLI on a simulated switch: the terminal (sim/switches/terminal.py), the NOS's prompt for
its mode, paging, the privilege commands, and each line's answer (sim/switches/render.py).

Modes, as each NOS enters and leaves them:
- EOS logs a user in to unprivileged EXEC (`sw>`); `enable` enters privileged EXEC (`sw#`: no enable secret
  is configured, so no password is asked), `disable` leaves it. netmiko's arista.py enters it with `enable`
  and waits for `#`.
- NX-OS and OS10 log a network-admin / sysadmin user in at `sw#`: netmiko's check_enable_mode (`#` in the
  prompt) finds them privileged and sends nothing.
- SONiC logs in to bash (`admin@sw:~$`); netmiko's linux driver becomes root with `sudo -s`: sudo asks the
  user's own password (`[sudo] password for admin: `, sudo's default prompt, as Debian's `%sudo ALL=(ALL:ALL)
  ALL` rule requires), not echoed, and the root shell's prompt is `root@sw:/home/admin# `; `exit` returns.

Paging (NX-OS, EOS, OS10): a page is as long as the terminal the client asked for (the pty request's rows;
PAGE_LINES when it gave none), as a real switch detects the window's lines (on EOS, https://lkhill.com/
ansible-pagination/: the device detects the terminal's lines, `terminal length` overrides them; Cisco's NX-API
reference shows NX-OS's `show terminal` of an xterm session as 24 lines, 80 columns); the output stops at the
NOS's pager prompt, Space (any key) shows the next page and `q` ends the output.
`terminal length 0` turns paging off. netmiko asks for a 511x1000 terminal and then sends
`terminal length 0`. The `page` fault pages every PAGE_LINES lines whatever the terminal or `terminal length`
say. SONiC's `show` prints through no pager (sonic-utilities' utilities_common/cli.py run_command writes a
command's output with click.echo).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from dataclasses import dataclass
from typing import Any

from sim.switches.model import SimSwitch
from sim.switches.render import PAGE_LINES, answer, pager, prompt
from sim.switches.terminal import Terminal

IDLE_S = 300.0
BEHIND_S = 0.15  # how long each line keeps a switch with the `falls_behind` fault busy
SUDO_TRIES = 3


@dataclass
class Mode:
    user: str
    password: str
    privileged: bool = False  # EOS: enable; SONiC: the root shell of `sudo -s`
    page_lines: int = PAGE_LINES  # 0: no paging


def current_prompt(sw: SimSwitch, mode: Mode) -> str:
    if sw.platform == "sonic" and mode.privileged:
        return f"root@{sw.name}:/home/{mode.user}# "
    if sw.platform == "arista_eos":
        return f"{sw.name}{'#' if mode.privileged else '>'}"
    return prompt(sw, mode.user)


async def _write_paged(term: Terminal, text: str, page_lines: int, more: str) -> bool:
    """Write `text`, stopping at `more` every `page_lines` lines (0: never); False if the client went away."""
    lines = text.splitlines(keepends=True)
    while lines:
        chunk, lines = (lines[:page_lines], lines[page_lines:]) if page_lines else (lines, [])
        term.write("".join(chunk))
        if lines:
            term.write(more)
            key = await term.read_key()
            term.write("\r" + " " * len(more) + "\r")
            if not key or key in "qQ":
                return bool(key)
    return True


async def _sudo(term: Terminal, mode: Mode) -> str:
    for _ in range(SUDO_TRIES):
        term.write(f"[sudo] password for {mode.user}: ")
        typed = await term.read_line(echo=False)
        if typed is None:
            return ""
        if hmac.compare_digest(typed.encode(), mode.password.encode()):
            mode.privileged = True
            return ""
        term.write("Sorry, try again.\n")
    return f"sudo: {SUDO_TRIES} incorrect password attempts\n"


async def _privilege(term: Terminal, sw: SimSwitch, mode: Mode, words: str) -> str | None:
    """The answer to a privilege command of this NOS, or None when `words` is none."""
    if sw.platform == "arista_eos" and words in ("enable", "disable"):
        mode.privileged = words == "enable"
        return ""
    if sw.platform == "sonic" and words in ("sudo -s", "sudo su"):
        return "" if mode.privileged else await _sudo(term, mode)  # root's sudo asks nothing (shells not nested)
    return None


async def _line(term: Terminal, sw: SimSwitch, mode: Mode, line: str) -> bool:
    """Run one line; False when the session ends."""
    words = " ".join(line.split())
    if words == "exit":
        if sw.platform == "sonic" and mode.privileged:  # leaves the root shell, back to the user's
            mode.privileged = False
            return True
        return False
    if words == "terminal length 0":
        mode.page_lines = 0
    privileged = await _privilege(term, sw, mode, words)
    text = answer(sw, words) if privileged is None else privileged
    if words.startswith("show mac") and sw.fault == "hang":
        term.write(text[: len(text) // 2])
        await asyncio.sleep(IDLE_S)
        return False
    if words.startswith("show lldp") and sw.fault == "lldp_disabled":  # NX-OS without `feature lldp`
        text = answer(sw, "show lldp (feature disabled)")
    if words.startswith("show") and sw.fault == "unknown_format":
        text = "Syntax error: Illegal parameter\n"
    page_lines = PAGE_LINES if sw.fault == "page" else 0 if sw.platform == "sonic" else mode.page_lines
    return await _write_paged(term, text, page_lines, pager(sw))


async def run_session(proc: Any, sw: SimSwitch, user: str, password: str) -> None:
    """The CLI of one SSH session until the client exits or goes away."""
    term = Terminal(proc, IDLE_S, BEHIND_S if sw.fault == "falls_behind" else 0.0)
    rows = proc.term_size[1] if proc.term_size else 0
    mode = Mode(user, password, page_lines=rows or PAGE_LINES)
    try:
        term.write("\n" + current_prompt(sw, mode))
        while True:
            line = await term.read_line()
            if line is None:
                break
            async with term.running():
                if not await _line(term, sw, mode, line):
                    break
            term.write(current_prompt(sw, mode))
    except (TimeoutError, OSError):
        pass
    finally:
        term.close()
        with contextlib.suppress(Exception):  # the connection may already be gone
            proc.exit(0)
