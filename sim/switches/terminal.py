"""A switch CLI's terminal: what a command-line shell on a pseudo-terminal does with what an SSH client types.

The CLI reads one line at a time, as readline does (NX-OS, EOS and OS10 CLIs and SONiC's bash all edit lines
this way): it echoes each character when it reads it, Enter as CR LF, and answers the line with its output
and a new prompt before it reads the next. So Enters typed together come back one prompt per line, each on
its own line (`sw#` CR LF `sw#` CR LF `sw#`), never glued, and a command's echo always follows the prompt
of the line before it.

A CLI that falls behind (`busy_s` > 0: each line takes that long to run, as on a loaded switch) leaves the
terminal in its cooked mode while it runs, and the pseudo-terminal echoes what arrives meanwhile at once;
the CLI echoes it again after its prompt when it reads it. netmiko's drivers document both: cisco_nxos.py
("NX-OS has an issue where it echoes the command even though it hasn't returned the prompt") and arista.py
("Arista's sometimes duplicate the command echo if they fall behind", with the capture
`arista9-napalm#` / `show version | json` / `arista9-napalm#show version | json`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

MAX_LINE = 4096
MAX_TYPED_AHEAD = 64 * 1024  # a client that types this much ahead of the CLI is dropped
_ERASE = "\x7f\x08"  # DEL and BS: the previous character is erased (echoed as BS SP BS)


def _cooked_echo(text: str) -> str:
    """What a pseudo-terminal in cooked mode echoes for `text` (ICRNL, then ONLCR: every Enter as CR LF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")


class Terminal:
    """The terminal of one SSH session: typed input kept until the CLI reads it, echo as described above."""

    def __init__(self, proc: Any, idle_s: float, busy_s: float = 0.0) -> None:
        self._proc = proc
        self._idle_s = idle_s
        self.busy_s = busy_s
        self._typed = ""  # arrived, not yet read by the CLI
        self._cr = False  # the last line ended with CR: a LF right after it is the same Enter
        self._closed = False
        self._arrived = asyncio.Event()
        self._busy = False
        self._pump = asyncio.get_running_loop().create_task(self._receive())

    def write(self, text: str) -> None:
        """Output as the CLI writes it, each line ended CR LF."""
        self._proc.stdout.write(text.replace("\r\n", "\n").replace("\n", "\r\n"))

    async def _receive(self) -> None:
        try:
            while True:
                data = await self._proc.stdin.read(4096)
                if not data:
                    break
                if self._busy:
                    self._proc.stdout.write(_cooked_echo(data))
                self._typed += data
                self._arrived.set()
                if len(self._typed) > MAX_TYPED_AHEAD:
                    break
        except Exception:  # the session went away: the CLI sees end of input
            pass
        self._closed = True
        self._arrived.set()

    async def _wait(self) -> bool:
        """Until something is typed; False at end of input."""
        while not self._typed:
            if self._closed:
                return False
            self._arrived.clear()
            await asyncio.wait_for(self._arrived.wait(), self._idle_s)
        return True

    async def read_line(self, echo: bool = True) -> str | None:
        """The next line the CLI reads, echoed as read (`echo` False: a password, only its Enter echoed);
        None at end of input or for a line longer than MAX_LINE."""
        line: list[str] = []
        while True:
            if not await self._wait():
                return None
            out: list[str] = []
            for i, ch in enumerate(self._typed):
                if self._cr and ch == "\n":
                    self._cr = False
                    continue
                self._cr = False
                if ch in "\r\n":
                    self._typed, self._cr = self._typed[i + 1:], ch == "\r"
                    self.write("".join(out) + "\n")
                    return "".join(line)
                if ch in _ERASE:
                    if line:
                        line.pop()
                        out.append("\b \b" if echo else "")
                elif ch.isprintable():
                    line.append(ch)
                    out.append(ch if echo else "")
                if len(line) > MAX_LINE:
                    return None
            self._typed = ""
            self.write("".join(out))

    async def read_key(self) -> str:
        """One key, not echoed (a pager's prompt); '' at end of input."""
        if not await self._wait():
            return ""
        key, self._typed = self._typed[0], self._typed[1:]
        self._cr = False
        return key

    @contextlib.asynccontextmanager
    async def running(self) -> Any:
        """The CLI runs a line: for `busy_s` before it answers it reads nothing; the terminal echoes what arrives."""
        if self.busy_s <= 0:
            yield
            return
        self._busy = True  # what was typed before stays unechoed: it arrived while the CLI's readline held the tty raw
        try:
            await asyncio.sleep(self.busy_s)
        finally:
            self._busy = False
        yield

    def close(self) -> None:
        self._pump.cancel()
