"""Run one command on one host over SSH (asyncssh), with the site's keys, a deadline and an output cap.

Where the controller finds a host: `$BRINGUP_SSH_ADDRESS_MAP` (a JSON file `{"host": "address[:port]"}`,
which the simulated lab exports), else the site's `ssh.address_overrides`, else the host name. The key
and known_hosts file come from `$BRINGUP_SSH_KEY_FILE` / `$BRINGUP_SSH_KNOWN_HOSTS` when set, else
from the site's `ssh.key_file` / `ssh.known_hosts` (relative to the site file). A site without a
known_hosts file trusts each host's key on first use and pins it in `state/<site>.known_hosts`; a
changed key afterwards is refused, exactly like a mismatch against a known_hosts file.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.packet import PacketDecodeError

from provision.site.bounded import InputRefused, read_text
from provision.site.endpoints import split_host_port
from provision.site.model import Site
from provision.ssh.errors import (
    SshAuthFailed,
    SshConfigError,
    SshConnectTimeout,
    SshDisconnected,
    SshError,
    SshHostKeyMismatch,
    SshProtocolError,
    SshRefused,
    SshTimeout,
)

ENV_KEY_FILE = "BRINGUP_SSH_KEY_FILE"
ENV_KNOWN_HOSTS = "BRINGUP_SSH_KNOWN_HOSTS"
ENV_ADDRESS_MAP = "BRINGUP_SSH_ADDRESS_MAP"

DEFAULT_OUTPUT_LIMIT = 4 * 1024 * 1024
_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
)


@dataclass(frozen=True)
class Endpoint:
    host: str
    address: str
    port: int
    user: str


@dataclass(frozen=True)
class RemoteRun:
    """What a command did on a host: its exit status (None when it died on a signal) and its output."""

    host: str
    rc: int | None
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool = False


MAX_ADDRESS_MAP_BYTES = 16 * 1024 * 1024
MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024


def load_address_map(path: Path, default_port: int) -> dict[str, tuple[str, int]]:
    try:
        data = json.loads(read_text(path, limit=MAX_ADDRESS_MAP_BYTES, what="address map"))
    except (OSError, ValueError, InputRefused) as exc:
        raise SshConfigError(f"${ENV_ADDRESS_MAP}={path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SshConfigError(f"${ENV_ADDRESS_MAP}={path}: expected an object of host name → 'address[:port]'")
    try:
        return {str(host): split_host_port(value, default_port) for host, value in data.items()}
    except ValueError as exc:
        raise SshConfigError(f"${ENV_ADDRESS_MAP}={path}: bad port ({exc})") from None


class TrustOnFirstUse:
    """Host keys pinned the first time a host answers, in a file of `address:port key` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: dict[str, str] = {}
        if path.is_file():
            try:
                text = read_text(path, limit=MAX_KNOWN_HOSTS_BYTES, what="known_hosts file")
            except InputRefused as exc:
                raise SshConfigError(str(exc)) from None
            for line in text.splitlines():
                target, _, key = line.partition(" ")
                if target and key:
                    self._keys[target] = key.strip()

    def check(self, endpoint: Endpoint, key: str) -> None:
        target = f"{endpoint.address}:{endpoint.port}"
        known = self._keys.get(target)
        if known is None:
            self._keys[target] = key
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(f"{target} {key}\n")
        elif known != key:
            raise SshHostKeyMismatch(
                endpoint.host,
                f"host key of {target} changed since first use (pinned in {self.path}); "
                "if the host was reinstalled, remove its line there",
            )


@dataclass
class SshSettings:
    user: str
    port: int
    connect_timeout_s: float
    key_file: Path | None
    known_hosts: Path | None
    tofu_file: Path | None
    addresses: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    _client_keys: Any = None
    _known: Any = None
    _tofu: TrustOnFirstUse | None = None

    @classmethod
    def from_site(cls, site: Site, environ: Mapping[str, str] | None = None) -> SshSettings:
        env = os.environ if environ is None else environ
        spec = site.spec.ssh

        def site_path(value: str | None) -> Path | None:
            return None if value is None else (site.directory / value)

        key_file = Path(env[ENV_KEY_FILE]) if env.get(ENV_KEY_FILE) else site_path(spec.key_file)
        known = Path(env[ENV_KNOWN_HOSTS]) if env.get(ENV_KNOWN_HOSTS) else site_path(spec.known_hosts)
        addresses: dict[str, tuple[str, int]] = {
            host: split_host_port(value, spec.port) for host, value in spec.address_overrides.items()
        }
        if env.get(ENV_ADDRESS_MAP):
            addresses.update(load_address_map(Path(env[ENV_ADDRESS_MAP]), spec.port))
        tofu = None if known is not None else site.paths.known_hosts
        return cls(spec.user, spec.port, spec.connect_timeout_s, key_file, known, tofu, addresses)

    def endpoint(self, host: str) -> Endpoint:
        address, port = self.addresses.get(host, (host, self.port))
        return Endpoint(host, address, port, self.user)

    def prepare(self) -> None:
        """Read the key and known_hosts once, not once per host; errors name the file."""
        if self.key_file is not None and self._client_keys is None:
            try:
                self._client_keys = [asyncssh.read_private_key(str(self.key_file))]
            except (OSError, asyncssh.KeyImportError) as exc:
                raise SshConfigError(f"SSH key {self.key_file}: cannot be read ({exc})") from None
        if self.known_hosts is not None and self._known is None:
            try:
                self._known = asyncssh.read_known_hosts(str(self.known_hosts))
            except (OSError, ValueError) as exc:
                raise SshConfigError(f"known_hosts {self.known_hosts}: cannot be read ({exc})") from None
        if self.tofu_file is not None and self._tofu is None:
            self._tofu = TrustOnFirstUse(self.tofu_file)

    def connect_options(self) -> dict[str, Any]:
        self.prepare()
        # AES-GCM first: one cipher call per packet where chacha20-poly1305 (asyncssh's default) makes several,
        # which is most of the controller's CPU across hundreds of hosts. Every OpenSSH server offers it.
        options: dict[str, Any] = {"known_hosts": self._known, "encryption_algs": _CIPHERS}
        if self._client_keys is not None:
            options["client_keys"] = self._client_keys
            options["agent_path"] = None
        return options

    def pin(self, endpoint: Endpoint, conn: Any) -> None:
        if self._tofu is None:
            return
        key = conn.get_server_host_key()
        if key is None:
            raise SshHostKeyMismatch(endpoint.host, "the server showed no host key")
        self._tofu.check(endpoint, key.export_public_key("openssh").decode("ascii").strip())


def _map_connect_error(host: str, exc: BaseException) -> SshError:
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return SshHostKeyMismatch(host, f"host key not accepted: {exc}")
    if isinstance(exc, asyncssh.PermissionDenied):
        return SshAuthFailed(host, f"authentication refused: {exc}")
    if isinstance(exc, ConnectionRefusedError):
        return SshRefused(host, "connection refused")
    if isinstance(exc, TimeoutError):
        return SshConnectTimeout(host, "no SSH handshake within the connect timeout")
    if isinstance(exc, asyncssh.ProtocolError | PacketDecodeError):
        return SshProtocolError(host, f"the peer does not speak SSH: {_short(exc)}")
    if isinstance(exc, asyncssh.DisconnectError | asyncssh.ConnectionLost | ConnectionError | EOFError):
        return SshDisconnected(host, f"connection dropped while connecting: {exc}")
    if isinstance(exc, OSError):
        return SshRefused(host, f"cannot connect: {exc.strerror or exc}")
    return SshError(host, f"{type(exc).__name__}: {exc}")


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


async def _read_limited(stream: Any, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True


async def run_command(
    endpoint: Endpoint,
    settings: SshSettings,
    command: str,
    *,
    stdin: bytes = b"",
    timeout_s: float,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
) -> RemoteRun:
    """Run `command` on the host and return what it did; every failure to get an answer is an `SshError`."""
    started = time.monotonic()
    phase = "connect"
    conn: Any = None
    try:
        async with asyncio.timeout(timeout_s):
            try:
                conn = await asyncssh.connect(
                    endpoint.address,
                    endpoint.port,
                    username=endpoint.user,
                    connect_timeout=min(settings.connect_timeout_s, timeout_s),
                    **settings.connect_options(),
                )
            except (OSError, asyncssh.Error, EOFError, PacketDecodeError) as exc:
                raise _map_connect_error(endpoint.host, exc) from None
            settings.pin(endpoint, conn)
            phase = "run"
            proc = await conn.create_process(command, encoding=None)
            proc.stdin.write(stdin)
            proc.stdin.write_eof()

            async def read(stream: Any) -> tuple[bytes, bool]:
                data, cut = await _read_limited(stream, output_limit)
                if cut:  # a runaway command: stop it, which also ends the other stream's read
                    proc.close()
                return data, cut

            (out, out_cut), (err, err_cut) = await asyncio.gather(read(proc.stdout), read(proc.stderr))
            await proc.wait_closed()
            return RemoteRun(
                endpoint.host,
                proc.exit_status if proc.exit_status is not None and proc.exit_status >= 0 else None,
                out.decode("utf-8", errors="replace"),
                err.decode("utf-8", errors="replace"),
                time.monotonic() - started,
                truncated=out_cut or err_cut,
            )
    except TimeoutError:
        if phase == "connect":
            raise SshConnectTimeout(endpoint.host, f"no SSH session within {timeout_s:g} s") from None
        raise SshTimeout(endpoint.host, f"the command did not finish within {timeout_s:g} s") from None
    except (asyncssh.Error, ConnectionError, EOFError, PacketDecodeError) as exc:
        if phase == "connect" or isinstance(exc, asyncssh.ProtocolError | PacketDecodeError):
            raise _map_connect_error(endpoint.host, exc) from None
        raise SshDisconnected(endpoint.host, f"connection dropped while the command ran: {exc}") from None
    finally:
        if conn is not None:
            conn.close()
