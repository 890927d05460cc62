"""A typed client over Slurm's own commands: `sinfo --json` to read nodes, `scontrol update` to change them.

Why commands and not slurmrestd: Slurm 22.05's REST API (openapi v0.0.38) cannot update a node (node updates
arrive with v0.0.39 in 23.02; REFERENCE-wave3 A2), and pyslurm has no release for 22.05 on PyPI (A7). Reads go
through `sinfo --json`, Slurm's own JSON (no hand-parsed `scontrol` text); writes through `scontrol update`, the
command Slurm documents for them. Every call has the site's deadline (`slurm.timeout_s`), a bounded answer,
no shell (a reason is one argv word, whatever quotes it holds), and its process group is killed when late.
Status of a failed call maps to an error in one place (`_failure`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from provision.hostfiles import compress_hostlist
from provision.site.slurm import Slurm
from provision.slurm.errors import SlurmAnswerInvalid, SlurmNotInstalled, SlurmRefused, SlurmUnreachable
from provision.slurm.nodes import SlurmNode, clean, parse_sinfo_json

MAX_ANSWER_BYTES = 64 << 20  # sinfo --json of 10,000 nodes is ~30 MB
_UNREACHABLE = re.compile(r"Unable to contact slurm controller|Socket timed out|Unable to establish control machine|"
                          r"Zero Bytes were transmitted|Connection refused|Communication connection failure", re.I)
_UNKNOWN_NODE = re.compile(r"Invalid node name specified", re.I)


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str


class SlurmClient:
    """One Slurm cluster as the bringup controller reaches it: its client commands and their SLURM_CONF."""

    def __init__(self, settings: Slurm, *, env: dict[str, str] | None = None) -> None:
        self.settings = settings
        base = dict(os.environ if env is None else env)
        if settings.conf:
            base["SLURM_CONF"] = settings.conf
        base.setdefault("LC_ALL", "C")
        self._env = base

    def _command(self, name: str) -> str:
        if self.settings.commands_dir:
            path = Path(self.settings.commands_dir) / name
            if not os.access(path, os.X_OK):
                raise SlurmNotInstalled(f"{path} is not an executable (slurm.commands_dir in the site file)")
            return str(path)
        found = shutil.which(name, path=self._env.get("PATH"))
        if found is None:
            raise SlurmNotInstalled(f"{name} is not on PATH: install Slurm's client commands (Debian: slurm-client) "
                                    "or set slurm.commands_dir in the site file")
        return found

    async def _run(self, argv: Sequence[str]) -> CommandResult:
        full = [self._command(argv[0]), *argv[1:]]
        timeout = self.settings.timeout_s
        try:
            proc = await asyncio.create_subprocess_exec(
                *full, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self._env, start_new_session=True)
        except OSError as exc:
            raise SlurmNotInstalled(f"cannot run {full[0]}: {exc}") from None
        assert proc.stdout is not None and proc.stderr is not None
        try:
            out, err = await asyncio.wait_for(
                asyncio.gather(_read(proc.stdout, MAX_ANSWER_BYTES + 1), _read(proc.stderr, 1 << 20)), timeout)
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            _kill(proc)
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), 5)
            raise SlurmUnreachable(f"{argv[0]} did not finish within {timeout:g} s (slurm.timeout_s): slurmctld down "
                                   "or overloaded; nothing was changed by it") from None
        except BaseException:
            _kill(proc)
            raise
        if len(out) > MAX_ANSWER_BYTES:
            _kill(proc)
            raise SlurmAnswerInvalid(f"{argv[0]} answered more than {MAX_ANSWER_BYTES >> 20} MiB")
        return CommandResult(proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    async def nodes(self) -> tuple[SlurmNode, ...]:
        """Every node slurmctld knows, with its state, flags and reason."""
        result = await self._run(["sinfo", "--json"])
        if result.rc != 0:
            raise _failure("sinfo --json", result)
        try:
            return parse_sinfo_json(result.stdout)
        except SlurmAnswerInvalid as exc:
            if _UNREACHABLE.search(result.stderr):
                raise _failure("sinfo --json", result) from None
            raise exc from None

    async def update(self, names: Sequence[str], state: str, reason: str | None = None) -> None:
        """`scontrol update NodeName=<hostlist> State=<state> [Reason=<reason>]`. Slurm applies a hostlist node by
        node and stops at the first name it does not know (the earlier ones stay changed): callers pass only
        names `nodes()` returned."""
        if not names:
            return
        argv = ["scontrol", "update", f"NodeName={compress_hostlist(list(names))}", f"State={state}"]
        if reason is not None:
            argv.append(f"Reason={one_line(reason)}")
        result = await self._run(argv)
        if result.rc != 0:
            raise _failure(f"scontrol update State={state}", result)

    async def show_topology(self) -> str:
        result = await self._run(["scontrol", "show", "topology"])
        if result.rc != 0:
            raise _failure("scontrol show topology", result)
        return result.stdout


def one_line(reason: str, limit: int = 255) -> str:
    """A reason Slurm stores as given: one line (Slurm shows only a reason's first line with its user and time),
    no control characters, bounded."""
    flat = " ".join(reason.split())
    return clean(flat, limit)


async def _read(stream: asyncio.StreamReader, limit: int) -> bytes:
    """Up to `limit` bytes, to the end of the stream (a single read() returns whatever has arrived so far)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await stream.read(min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _failure(what: str, result: CommandResult) -> Exception:
    """The one place a failed Slurm command becomes an error."""
    said = clean(" ".join(result.stderr.split())[-300:] or f"exit {result.rc}", 300)
    if _UNREACHABLE.search(result.stderr):
        return SlurmUnreachable(f"{what}: slurmctld cannot be reached ({said}); nothing was changed by this call")
    if _UNKNOWN_NODE.search(result.stderr):
        return SlurmRefused(f"{what}: Slurm does not know a node of the request ({said})")
    return SlurmRefused(f"{what} failed: {said}")
