"""The switch simulator's terminal (sim/switches/terminal.py) on its own: lines read one at a time and echoed
when read, an Enter sent as CR LF split over two packets is one line, a password is not echoed, a line
too long ends the session, and a busy CLI's terminal echoes what arrives at once (netmiko's arista.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from sim.switches.terminal import MAX_LINE, Terminal


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, data: str) -> None:
        self.text += data


class _In:
    def __init__(self) -> None:
        self.chunks: asyncio.Queue[str] = asyncio.Queue()

    async def read(self, _n: int) -> str:
        return await self.chunks.get()


class _Proc:
    def __init__(self) -> None:
        self.stdin, self.stdout = _In(), _Out()


def _run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(body(), 5))


def test_lines_typed_together_are_read_and_echoed_one_at_a_time() -> None:
    async def body() -> None:
        proc = _Proc()
        term = Terminal(proc, idle_s=5)
        proc.stdin.chunks.put_nowait("show mac\r")
        proc.stdin.chunks.put_nowait("\nexit\n")
        assert await term.read_line() == "show mac"
        assert proc.stdout.text == "show mac\r\n"  # the next line is not echoed before the CLI reads it
        assert await term.read_line() == "exit"  # the LF of the CR LF, in the next packet, was no empty line
        assert proc.stdout.text == "show mac\r\nexit\r\n"
        proc.stdin.chunks.put_nowait("")
        assert await term.read_line() is None
        term.close()
    _run(body)


def test_a_password_is_read_without_echo_and_an_overlong_line_ends_the_session() -> None:
    async def body() -> None:
        proc = _Proc()
        term = Terminal(proc, idle_s=5)
        proc.stdin.chunks.put_nowait("s3cret\n" + "x" * (MAX_LINE + 1))
        assert await term.read_line(echo=False) == "s3cret" and proc.stdout.text == "\r\n"
        assert await term.read_line() is None
        term.close()
    _run(body)


def test_what_arrives_while_the_cli_is_busy_is_echoed_at_once_and_again_when_read() -> None:
    async def real() -> None:
        proc = _Proc()
        term = Terminal(proc, idle_s=5, busy_s=0.2)
        proc.stdin.chunks.put_nowait("terminal width 511\n")
        assert await term.read_line() == "terminal width 511"

        async def type_ahead() -> None:
            await asyncio.sleep(0.05)
            proc.stdin.chunks.put_nowait("show version\n")
        typing = asyncio.create_task(type_ahead())
        async with term.running():
            pass
        await typing
        term.write("sw>")
        assert await term.read_line() == "show version"
        assert proc.stdout.text == "terminal width 511\r\nshow version\r\nsw>show version\r\n"
        term.close()
    _run(real)
