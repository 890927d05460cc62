"""Run a fan-out plan over SSH. A seed copy streams the archive from the controller into the host's
`receive` command; a host-to-host copy runs the site's `push` command on the source host (it connects to
the target itself, so the bytes never cross the controller). Every receiver then verifies: the archive's
SHA-256, unpacked under the destination, the prefix rewritten there, the summary's env_id and versions
equal to the job's manifest (and, with `deep`, every file against the archive's sha256sum list).

Command templates (shell, fields in braces): `{dir}` the host's destination folder, `{dst}` the archive
there, `{src}` the archive on the source host, `{target}`, `{address}`, `{port}`, `{user}` the target's SSH
endpoint, `{key_file}` and `{known_hosts}` the controller's SSH files (where the hosts share them, as in the lab).
`encoding: base64` carries the bytes as text over the channel (for endpoints, like the lab's, whose
sessions are text)."""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.ship.tree import CONTROLLER, Copy, replan
from provision.ssh import SshSettings
from provision.ssh.client import run_command
from provision.ssh.errors import SshError
from provision.state import peer_json

ARCHIVE = "bringup-env.tar.gz"
DEST = "/opt/bringup/env-ship"
SUMMARY = ".bringup-env-summary.json"
SUMS = ".bringup-env.sha256"
RAW_PUSH = ("ssh -o BatchMode=yes {address} -p {port} 'mkdir -p {dir} && cat > {dst}.part && mv {dst}.part {dst}'"
            " < {src}")


@dataclass(frozen=True)
class ShipConfig:
    dest: str = DEST  # `{host}` is replaced by the host's name (the lab's hosts share a disk)
    push: str = RAW_PUSH
    encoding: str = "raw"  # raw | base64
    deep: bool = False
    timeout_s: float = 1800.0
    concurrency: int = 256


@dataclass
class HostShip:
    host: str
    ok: bool = False
    source: str = ""
    seconds: float = 0.0
    error: str = ""
    found: dict[str, Any] = field(default_factory=dict)


def _fill(template: str, **fields: str) -> str:
    out = template
    for k, v in fields.items():
        out = out.replace("{" + k + "}", v)
    return out


def host_dir(cfg: ShipConfig, host: str) -> str:
    return cfg.dest.replace("{host}", host)


def receive_command(cfg: ShipConfig, host: str) -> str:
    d = shlex.quote(host_dir(cfg, host))
    decode = "base64 -d" if cfg.encoding == "base64" else "cat"
    return f"mkdir -p {d} && {decode} > {d}/{ARCHIVE}.part && mv {d}/{ARCHIVE}.part {d}/{ARCHIVE}"


def verify_command(cfg: ShipConfig, host: str, prefix: str) -> str:
    d = host_dir(cfg, host)
    env = shlex.quote(d + "/env")
    sed = shlex.quote(f"s#{prefix}#{d}/env#g")
    deep = f" && (cd {env} && sha256sum -c --quiet {SUMS} >/dev/null)" if cfg.deep else ""
    return (f"cd {shlex.quote(d)} && sha256sum {ARCHIVE} | cut -c1-64 && rm -rf env && mkdir env && "
            f"tar -xzf {ARCHIVE} -C env{deep} && {{ grep -rlI --null -F {shlex.quote(prefix)} env/bin || true; }} | "
            f"xargs -0 -r sed -i {sed} && cat env/{SUMMARY}")


def check_reply(stdout: str, manifest: Mapping[str, Any]) -> tuple[bool, str, dict[str, Any]]:
    lines = stdout.strip().splitlines()
    if len(lines) < 2:
        return False, "no checksum and summary in the reply", {}
    try:
        summary = peer_json.loads(lines[-1], what="the unpacked summary")
    except json.JSONDecodeError:
        return False, "the unpacked summary is not JSON", {}
    found = {"archive_sha256": lines[0].strip(), "env_id": summary.get("env_id"), "versions": summary.get("versions")}
    if found["archive_sha256"] != manifest["archive_sha256"]:
        got, want = found["archive_sha256"][:12], str(manifest["archive_sha256"])[:12]
        return False, f"archive checksum {got}, expected {want}", found
    if found["env_id"] != manifest["env_id"] or found["versions"] != manifest["versions"]:
        return False, f"environment {found['env_id']} {found['versions']}, expected {manifest['env_id']}", found
    return True, "", found


class Shipper:
    def __init__(self, settings: SshSettings, cfg: ShipConfig, archive: Path, manifest: Mapping[str, Any]) -> None:
        self.settings, self.cfg, self.manifest = settings, cfg, manifest
        raw = archive.read_bytes()
        self.payload = base64.encodebytes(raw) if cfg.encoding == "base64" else raw
        self.controller_copies = 0
        self._sem = asyncio.Semaphore(cfg.concurrency)

    async def _copy(self, c: Copy) -> HostShip:
        started = time.monotonic()
        res = HostShip(c.target, source=c.source or "controller")
        target = self.settings.endpoint(c.target)
        try:
            async with self._sem:
                if c.source == CONTROLLER:
                    self.controller_copies += 1
                    run = await run_command(target, self.settings, receive_command(self.cfg, c.target),
                                            stdin=self.payload, timeout_s=self.cfg.timeout_s)
                else:
                    src, dst = f"{host_dir(self.cfg, c.source)}/{ARCHIVE}", f"{host_dir(self.cfg, c.target)}/{ARCHIVE}"
                    cmd = _fill(self.cfg.push, key_file=str(self.settings.key_file or ""),
                                known_hosts=str(self.settings.known_hosts or ""), user=target.user,
                                src=shlex.quote(src), dst=shlex.quote(dst),
                                dir=shlex.quote(host_dir(self.cfg, c.target)), target=c.target,
                                address=target.address, port=str(target.port))
                    run = await run_command(self.settings.endpoint(c.source), self.settings, cmd,
                                            timeout_s=self.cfg.timeout_s)
                if run.rc != 0:
                    raise SshError(c.target, f"copy from {res.source} exited {run.rc}: {run.stderr.strip()[-300:]}")
                check = await run_command(target, self.settings,
                                          verify_command(self.cfg, c.target, str(self.manifest["prefix"])),
                                          timeout_s=self.cfg.timeout_s)
            res.ok, res.error, res.found = check_reply(check.stdout, self.manifest) if check.rc == 0 else \
                (False, f"verify exited {check.rc}: {check.stderr.strip()[-300:]}", {})
        except SshError as e:
            res.error = str(e)
        res.seconds = time.monotonic() - started
        return res

    async def run(self, rounds: list[list[Copy]], progress: Callable[[HostShip], None] | None = None
                  ) -> list[HostShip]:
        results: list[HostShip] = []
        failed: set[str] = set()
        for i in range(len(rounds)):
            current = replan(rounds, failed)[i]
            done = await asyncio.gather(*(self._copy(c) for c in current))
            for r in done:
                if not r.ok:
                    failed.add(r.host)
                if progress:
                    progress(r)
            results += done
        return results
