"""`run_command` against hostile SSH peers on loopback: a server that floods output or stalls in the
middle of an answer (asyncssh), and raw peers that send no banner, a bad banner, an endless banner
line or malformed packets. Each ends in a typed `SshError` (or a truncated result for a flood) within
the deadline, never a hang, never more output kept than the cap."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from provision.ssh.client import Endpoint, RemoteRun, SshSettings, run_command
from provision.ssh.errors import SshConnectTimeout, SshDisconnected, SshError, SshProtocolError, SshTimeout
from provision.steps.pipeline import HEALTH
from tests.hostile.peers import Behaviour, MiB, Peer, peer, raw

DEADLINE_S = 1.5
LIMIT = 64 * 1024


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 15))  # the test's own bound, far past the client's


class _NoAuth(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # no authentication: the hostility is in what the server says afterwards


Process = Callable[[asyncssh.SSHServerProcess[bytes]], Coroutine[Any, Any, None]]


@asynccontextmanager
async def _ssh_server(tmp_path: Path, process: Process) -> AsyncIterator[int]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.create_server(_NoAuth, "127.0.0.1", 0, server_host_keys=[key], process_factory=process,
                                          encoding=None)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _settings(tmp_path: Path, port: int) -> SshSettings:
    # No key file: asyncssh would offer the user's own keys and agent; the peers ask for no authentication.
    settings = SshSettings("bringup", port, DEADLINE_S, None, None, tmp_path / "known_hosts")
    settings._client_keys = []  # no agent, no ~/.ssh keys of the machine running the tests
    return settings


async def _command(tmp_path: Path, port: int, *, timeout_s: float = DEADLINE_S) -> tuple[RemoteRun | SshError, float]:
    endpoint = Endpoint("gpu-hostile-01", "127.0.0.1", port, "bringup")
    started = time.monotonic()
    try:
        result: RemoteRun | SshError = await run_command(endpoint, _settings(tmp_path, port), "health-agent",
                                                         timeout_s=timeout_s, output_limit=LIMIT)
    except SshError as exc:
        result = exc
    return result, time.monotonic() - started


def test_a_host_that_floods_stdout_is_cut_at_the_output_limit(tmp_path: Path) -> None:
    async def flood(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        try:
            while True:
                proc.stdout.write(b"x" * 65536)
                await proc.stdout.drain()
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass

    async def scenario() -> tuple[RemoteRun | SshError, float]:
        async with _ssh_server(tmp_path, flood) as port:
            return await _command(tmp_path, port, timeout_s=5.0)  # ends at the cap, long before this

    result, took = _run(scenario())
    assert isinstance(result, RemoteRun) and result.truncated and len(result.stdout) == LIMIT
    assert took < 5.0


def test_a_host_that_stalls_in_the_middle_of_its_answer_is_a_timeout(tmp_path: Path) -> None:
    async def stall(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        proc.stdout.write(b'{"checks": [')  # half a report, then nothing
        await asyncio.sleep(3600)

    async def scenario() -> tuple[RemoteRun | SshError, float]:
        async with _ssh_server(tmp_path, stall) as port:
            return await _command(tmp_path, port)

    result, took = _run(scenario())
    assert isinstance(result, SshTimeout) and result.reason == "health_timeout"
    assert took < DEADLINE_S + 1.0


def test_a_host_that_drops_the_session_mid_answer_is_a_disconnect(tmp_path: Path) -> None:
    async def drop(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        proc.stdout.write(b'{"checks": [')
        await asyncio.sleep(0.05)
        proc.channel.get_connection().abort()

    async def scenario() -> tuple[RemoteRun | SshError, float]:
        async with _ssh_server(tmp_path, drop) as port:
            return await _command(tmp_path, port, timeout_s=5.0)  # ends at the drop, long before this

    result, took = _run(scenario())
    assert isinstance(result, SshDisconnected), result
    assert took < 5.0


def _raw_peer(data: bytes, *, repeat: int = 1) -> Behaviour:
    """Speak first with `data` (`repeat` times, as fast as the client reads), then hold the line."""
    async def run(p: Peer, _: bytes, w: asyncio.StreamWriter) -> None:
        for _step in range(repeat):
            await p.send(w, data)
        await asyncio.sleep(3600)
    return run


BANNER = b"SSH-2.0-OpenSSH_9.6\r\n"
GARBAGE_PACKET = b"\xff\xff\xff\xf0" + os.urandom(60)  # a packet length of 4 GB, then noise
ZERO_PACKET = b"\x00\x00\x00\x00" * 64


@pytest.mark.parametrize(("behaviour", "expected"), [
    (raw(b""), SshConnectTimeout),
    (_raw_peer(b"HTTP/1.1 400 Bad Request\r\n"), SshConnectTimeout),
    (_raw_peer(b"this is not ssh\r\n" * 64, repeat=4096), SshProtocolError),
    (_raw_peer(b"SSH-2.0-" + b"A" * 64 * 1024, repeat=1600), SshProtocolError),
    (_raw_peer(BANNER + GARBAGE_PACKET), SshProtocolError),
    (_raw_peer(BANNER + ZERO_PACKET), SshProtocolError),  # was a raw PacketDecodeError: "controller error"
    (_raw_peer(BANNER + os.urandom(64 * 1024), repeat=1600), SshProtocolError),
], ids=["no-banner", "http-banner", "pre-banner-flood", "endless-banner", "bad-packet-length", "zero-packets",
        "garbage-flood"])
def test_a_peer_that_does_not_speak_ssh_fails_the_connect_in_time(
        tmp_path: Path, behaviour: Behaviour, expected: type[SshError]) -> None:
    async def scenario() -> tuple[RemoteRun | SshError, float, int]:
        async with peer([behaviour], speaks_first=True) as host:
            result, took = await _command(tmp_path, host.port)
            return result, took, host.sent

    result, took, sent = _run(scenario())
    assert isinstance(result, expected), result
    assert result.reason in HEALTH.reasons  # with what to do about it
    assert took < DEADLINE_S + 1.0
    assert sent < 110 * MiB
