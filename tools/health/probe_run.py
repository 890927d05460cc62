"""Runs probes: live on the host (with timeouts, in the C locale), or replayed from a directory of captures."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .probes import PROBE_ERROR, TIMEOUT, TOOL_MISSING, Probe, ProbeResult, failed

# Shells answer 127 for "command not found" and 126 for "found but not executable"; captures made through a
# shell (and replay directories made from them) carry these codes instead of an exec failure.
_RC_NOT_FOUND = 127
_RC_NOT_EXECUTABLE = 126


def _child_env(extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    # Parsers read English tool output; a host's own locale must not change it.
    env.update(LC_ALL="C", LANG="C", LANGUAGE="C")
    return env


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def run_command(probe: Probe) -> ProbeResult:
    try:
        proc = subprocess.Popen(
            list(probe.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_env(probe.env),
            start_new_session=True,
        )
    except FileNotFoundError:
        return failed(probe.name, TOOL_MISSING, f"{probe.argv[0]} is not installed (not found on PATH)", rc=127)
    except PermissionError as exc:
        return failed(probe.name, PROBE_ERROR, f"{probe.argv[0]} cannot be executed: {exc}", rc=126)
    except OSError as exc:
        return failed(probe.name, PROBE_ERROR, f"{probe.argv[0]} could not start: {exc}")
    try:
        out, err = proc.communicate(timeout=probe.timeout_s)
    except subprocess.TimeoutExpired:
        # Kill the whole session: a hung tool's children must not keep the pipes (and us) open.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return failed(
            probe.name, TIMEOUT, f"{probe.describe} did not finish within {probe.timeout_s:g} s",
            output=_decode(out) + _decode(err),
        )
    text = _decode(out)
    if err:
        text = text + ("" if not text or text.endswith("\n") else "\n") + _decode(err)
    return ProbeResult(probe.name, text, proc.returncode)


def run_collector(probe: Probe, root: Path) -> ProbeResult:
    """Run an in-process reader under the probe's timeout.

    A read of /sys can block (a wedged HCA's firmware command, a GPU that fell off the bus), so the reader runs
    in a daemon thread that the agent waits for at most ``timeout_s``: past that the probe is a timeout and the
    thread is abandoned. Being a daemon it does not hold the interpreter at exit. (A thread stuck in an
    uninterruptible kernel sleep still delays the process's final teardown until the read returns; no
    user-space code can cut that short, but the report has been written by then.)
    """
    collect = probe.collect
    assert collect is not None
    box: list[tuple[str, int] | BaseException] = []

    def read() -> None:
        try:
            box.append(collect(root))
        except BaseException as exc:  # handed to the waiting thread, which decides
            box.append(exc)

    reader = threading.Thread(target=read, name=f"probe-{probe.name}", daemon=True)
    reader.start()
    reader.join(probe.timeout_s)
    if reader.is_alive() or not box:
        return failed(probe.name, TIMEOUT, f"{probe.describe} did not finish within {probe.timeout_s:g} s")
    got = box[0]
    if isinstance(got, OSError):
        return failed(probe.name, PROBE_ERROR, f"{probe.describe} failed: {got}")
    if isinstance(got, BaseException):
        raise got
    text, rc = got
    return ProbeResult(probe.name, text, rc)


class LiveRunner:
    def __init__(self, root: Path = Path("/"), workers: int = 8) -> None:
        self.root = root
        self.workers = workers

    def run(self, probe: Probe) -> ProbeResult:
        return run_command(probe) if probe.argv else run_collector(probe, self.root)

    def run_all(self, probes: Iterable[Probe], parallel: bool = True) -> dict[str, ProbeResult]:
        todo = list(probes)
        if not parallel or len(todo) < 2:
            return {p.name: self.run(p) for p in todo}
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return dict(zip([p.name for p in todo], pool.map(self.run, todo), strict=True))


class ReplayRunner:
    """Serves every probe from ``DIR/<probe>.out`` and optional ``DIR/<probe>.rc``.

    The rc file holds the exit status (default 0) or the word ``timeout`` to replay a hung tool. A missing
    ``.out`` file replays a host where the tool is absent.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def run(self, probe: Probe) -> ProbeResult:
        out_file = self.directory / f"{probe.name}.out"
        rc_file = self.directory / f"{probe.name}.rc"
        if not out_file.is_file():
            return failed(probe.name, TOOL_MISSING, f"replay: no {out_file.name} (tool absent on this host)", rc=127)
        try:
            text = _decode(out_file.read_bytes())
            # An rc file is a number or a word; bytes that are not UTF-8 are shown replaced, then refused below.
            rc_text = _decode(rc_file.read_bytes()[:64]).strip() if rc_file.is_file() else "0"
        except OSError as exc:
            return failed(probe.name, PROBE_ERROR, f"replay: cannot read {out_file.name} or its .rc: {exc}")
        if rc_text == "timeout":
            return failed(probe.name, TIMEOUT, f"{probe.describe} did not finish within {probe.timeout_s:g} s",
                          output=text)
        try:
            rc = int(rc_text)
        except ValueError:
            return failed(probe.name, PROBE_ERROR, f"replay: {rc_file.name} holds {rc_text!r}, not an exit code")
        return classify_shell_rc(ProbeResult(probe.name, text, rc))

    def run_all(self, probes: Iterable[Probe], parallel: bool = True) -> dict[str, ProbeResult]:
        return {p.name: self.run(p) for p in probes}


def classify_shell_rc(result: ProbeResult) -> ProbeResult:
    if result.rc == _RC_NOT_FOUND:
        first = next((line for line in result.output.splitlines() if line.strip()), "command not found")
        return failed(result.probe, TOOL_MISSING, f"tool not found: {first.strip()}", result.output, result.rc)
    if result.rc == _RC_NOT_EXECUTABLE:
        return failed(result.probe, PROBE_ERROR, "tool not executable", result.output, result.rc)
    return result


def record(results: Mapping[str, ProbeResult], directory: Path) -> None:
    """Write results in the replay layout, so a captured host can be replayed later."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, result in results.items():
        if result.failure_kind == TOOL_MISSING:
            (directory / f"{name}.out").unlink(missing_ok=True)
            (directory / f"{name}.rc").unlink(missing_ok=True)
            continue
        (directory / f"{name}.out").write_text(result.output, encoding="utf-8")
        rc = "timeout" if result.failure_kind == TIMEOUT else str(result.rc)
        (directory / f"{name}.rc").write_text(rc + "\n", encoding="utf-8")
