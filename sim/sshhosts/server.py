"""The asyncio SSH server behind every simulated host: one listener per host address, one process.

Per lab run it makes an ed25519 host key per host and one client key, and writes for the controller
(under `<run dir>/sshhosts/`): `client_ed25519` (the private key), `known_hosts` (each host's expected
key as `[address]:port`), `addresses.json` (host name → `address:port`). A host with the
`wrong_host_key` fault serves a different key than known_hosts lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import asyncssh

from sim.addresses import check_loopback
from sim.fdlimit import raise_fd_limit
from sim.sshhosts.addresses import ssh_host_address
from sim.sshhosts.agent_invocation import AGENT_PROGRAM, agent_level
from sim.sshhosts.faults import EndpointFault, Faults, HostFaults, OutputFault
from sim.sshhosts.perftest_session import handle
from sim.sshhosts.perftest_sim import Traffic, parse_invocation
from sim.sshhosts.replay import replay_dir
from sim.unixpath import socket_address

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_HOST = "BRINGUP_SIM_HOST"
ENV_FAULTS = "BRINGUP_SIM_FAULTS"

log = logging.getLogger("sim.sshhosts")


@dataclass(frozen=True)
class SimHost:
    name: str
    address: str
    port: int
    faults: HostFaults
    replay: Path


@dataclass(frozen=True)
class Files:
    """What the server writes for clients, under one directory."""

    root: Path

    @property
    def client_key(self) -> Path:
        return self.root / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def address_map(self) -> Path:
        return self.root / "addresses.json"

    @property
    def ready(self) -> Path:
        return self.root / "ready"

    @property
    def zygote_socket(self) -> Path:
        return self.root / "zygote.sock"

    @property
    def replay_work(self) -> Path:
        return self.root / "replay"


def plan_hosts(names: list[str], faults: Faults, files: Files, port: int, first_index: int = 0) -> list[SimHost]:
    files.replay_work.mkdir(parents=True, exist_ok=True)
    hosts = []
    for i, name in enumerate(names):
        address = check_loopback(ssh_host_address(first_index + i))
        hosts.append(SimHost(name, address, port, faults.for_host(name), replay_dir(faults, name, files.replay_work)))
    return hosts


def _write_private(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


async def _flood(process: Any) -> None:
    """An agent stuck printing: stdout without end, stderr open, no exit, until the client closes."""
    line = "x" * 1023 + "\n"
    while not process.is_closing():
        process.stdout.write(line * 64)
        await process.stdout.drain()


def _mangle(text: str, fault: OutputFault | None) -> str:
    if fault is OutputFault.empty:
        return ""
    if fault is OutputFault.truncated:
        return text[: len(text) // 2]
    if fault is OutputFault.garbled:
        return "\x1b[31m" + text[::-1].replace('"', "\ufffd") + "\x00"
    return text


class SshHostsServer:
    def __init__(self, hosts: list[SimHost], files: Files, faults: Faults, *, agent_mode: str = "fork",
                 traffic: Traffic | None = None) -> None:
        if agent_mode not in ("fork", "spawn"):
            raise ValueError(f"agent mode {agent_mode!r}: fork or spawn")
        self.hosts = hosts
        self.files = files
        self.faults = faults
        self.agent_mode = agent_mode
        self.traffic = traffic
        self._listeners: list[Any] = []
        self._zygote: subprocess.Popen[bytes] | None = None

    # setup -----------------------------------------------------------------------------------

    def _write_client_files(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        self.files.root.mkdir(parents=True, exist_ok=True)
        client = asyncssh.generate_private_key("ssh-ed25519")
        _write_private(self.files.client_key, client.export_private_key())
        self.files.client_key.with_suffix(".pub").write_bytes(client.export_public_key())
        expected: dict[str, Any] = {}
        served: dict[str, Any] = {}
        lines = []
        for host in self.hosts:
            key = asyncssh.generate_private_key("ssh-ed25519")
            expected[host.name] = key
            served[host.name] = (
                asyncssh.generate_private_key("ssh-ed25519") if host.faults.endpoint is EndpointFault.wrong_host_key
                else key
            )
            public = key.export_public_key().decode().strip()
            lines.append(f"[{host.address}]:{host.port} {public}\n")
        self.files.known_hosts.write_text("".join(lines), encoding="utf-8")
        addresses = {h.name: f"{h.address}:{h.port}" for h in self.hosts}
        self.files.address_map.write_text(json.dumps(addresses, indent=1), encoding="utf-8")
        return client, expected, served

    def _start_zygote(self) -> None:
        sock = self.files.zygote_socket
        sock.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": _pythonpath()}
        self._zygote = subprocess.Popen(
            [sys.executable, "-m", "sim.sshhosts.zygote", str(sock)], cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL
        )

    async def _wait_zygote(self) -> None:
        for _ in range(400):
            if self.files.zygote_socket.exists():
                return
            if self._zygote is not None and self._zygote.poll() is not None:
                raise RuntimeError(f"the agent zygote exited with {self._zygote.returncode}")
            await asyncio.sleep(0.025)
        raise RuntimeError("the agent zygote did not start")

    async def start(self) -> None:
        self.files.ready.unlink(missing_ok=True)
        raise_fd_limit()
        client, _expected, served = self._write_client_files()
        authorized = asyncssh.import_authorized_keys(client.export_public_key().decode())
        if self.agent_mode == "fork":
            self._start_zygote()
            await self._wait_zygote()
        for host in self.hosts:
            fault = host.faults.endpoint
            if fault is EndpointFault.refuse:
                continue
            if fault in (EndpointFault.hang_handshake, EndpointFault.drop):
                callback = _silent if fault is EndpointFault.hang_handshake else _drop
                server = await asyncio.start_server(callback, host.address, host.port, reuse_address=True)
                self._listeners.append(server)
                continue
            listener = await asyncssh.listen(
                host.address,
                host.port,
                server_host_keys=[served[host.name]],
                authorized_client_keys=authorized,
                process_factory=partial(self._session, host),
                encoding="utf-8",
                reuse_address=True,
                login_timeout=30,
            )
            self._listeners.append(listener)
        self.files.ready.write_text(f"{os.getpid()}\n", encoding="utf-8")

    async def close(self) -> None:
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        if self._zygote is not None:
            self._zygote.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=5)
            if self._zygote.poll() is None:
                self._zygote.kill()
            self._zygote = None
        self.files.ready.unlink(missing_ok=True)

    # sessions --------------------------------------------------------------------------------

    async def _session(self, host: SimHost, process: Any) -> None:
        try:
            command = process.command or ""
            stdin = await process.stdin.read()
            if host.faults.endpoint is EndpointFault.hang:
                while not process.is_closing():
                    await asyncio.sleep(0.2)
                return
            if host.faults.delay_s:
                await asyncio.sleep(host.faults.delay_s)
            if self.traffic is not None and await self._perftest(host, command, process):
                return
            level = agent_level(command)
            if level is not None and host.faults.agent_output is OutputFault.flood:
                await _flood(process)
                return
            if level is not None:
                rc, out, err = await self._agent(host, level, stdin)
                out = _mangle(out, host.faults.agent_output)
            else:
                rc, out, err = await self._shell(host, command, stdin, process)
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(rc)
        except (asyncssh.Error, ConnectionError, BrokenPipeError):
            process.close()
        except Exception as exc:  # a simulator bug shows as sshd's own failure status, not a silent drop
            log.exception("session on %s failed", host.name)
            process.stderr.write(f"sim.sshhosts: {type(exc).__name__}: {exc}\n")
            process.exit(255)

    async def _perftest(self, host: SimHost, command: str, process: Any) -> bool:
        """`ib_write_bw` over the simulated fabric, or the runner's `pkill` of it; False for other commands."""
        assert self.traffic is not None
        if self.traffic.kill(host.name, command):
            process.exit(0)
            return True
        inv = parse_invocation(command)
        if inv is None:
            return False
        result = await handle(self.traffic, host.name, inv, process, host.faults.perftest)
        if result is None:  # the session drops mid-run
            process.close()
            return True
        rc, out, err = result
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(rc)
        return True

    async def _agent(self, host: SimHost, level: str, config: str) -> tuple[int, str, str]:
        argv = ["--config", "{config}", "--level", level, "--json", "--replay", str(host.replay)]
        if self.agent_mode == "fork":
            with socket_address(self.files.zygote_socket) as address:
                reader, writer = await asyncio.open_unix_connection(address, limit=2**24)
            try:
                writer.write(json.dumps({"argv": argv, "config": config}).encode() + b"\n")
                await writer.drain()
                reply = json.loads(await reader.readline())
            finally:
                writer.close()
            return int(reply["rc"]), str(reply["stdout"]), str(reply["stderr"])
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            handle.write(config)
        try:
            proc = await asyncio.create_subprocess_exec(
                *AGENT_PROGRAM.split(), *[a.replace("{config}", handle.name) for a in argv],
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=REPO_ROOT,
            )
            out, err = await proc.communicate()
        finally:
            os.unlink(handle.name)
        return _exit_status(proc.returncode), out.decode(errors="replace"), err.decode(errors="replace")

    async def _shell(self, host: SimHost, command: str, stdin: str, process: Any) -> tuple[int, str, str]:
        env = {**os.environ, ENV_HOST: host.name, ENV_FAULTS: str(self.faults.path), "PYTHONPATH": _pythonpath()}
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT, env=env, start_new_session=True,
        )
        done = asyncio.ensure_future(proc.communicate(stdin.encode()))
        try:
            while not done.done():
                await asyncio.wait({done}, timeout=0.2)
                if not done.done() and process.is_closing():
                    raise ConnectionError("client went away")
            out, err = done.result()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        return _exit_status(proc.returncode), out.decode(errors="replace"), err.decode(errors="replace")


def _pythonpath() -> str:
    """The repository first (for `tools` and `sim`), then whatever the server itself was given."""
    return os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _exit_status(rc: int | None) -> int:
    if rc is None:
        return 1
    return 128 - rc if rc < 0 else rc  # a signal reads as 128 + its number, as in a shell


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accept and say nothing: the client waits for an SSH banner that never comes."""
    with contextlib.suppress(ConnectionError):
        await reader.read()
    writer.close()


async def _drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


def quiet_asyncssh() -> None:
    asyncssh.set_log_level(logging.WARNING)
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
