"""Run one infiniband-diags tool (`ibnetdiscover`, `perfquery`, `ibportstate`, `dump_lfts` ...): the one way
every part of fabric runs them.

Each run has a deadline, a cap on what it may print, its own process group and its own scratch directory:

- At the deadline, or once stdout passes the cap, the whole process group is killed (`start_new_session`):
  a site's tool prefix may be a wrapper that starts the tool as a child, and a tool killed alone would leave
  that child running.
- The tool runs in a temporary directory removed afterwards with whatever it left there: a tool built on a
  stand-in of libibumad may write its own files in the working directory, and killed at its deadline it would
  leave them in whatever directory the caller ran from (a repository checkout, an operator's home). Real
  tools on real HCAs write nothing there; the cost is one mkdir.
- stdout beyond `max_output` bytes is never read into memory (the run is an error); of stderr only the last
  `STDERR_TAIL` bytes are kept, enough for the tool's last complaint. Each tool has the cap its output warrants
  (`max_output_of`); a site whose fabric outgrows one raises it in its site file (`fabric.diags.max_output_mib`,
  provision/site/fabric_diags.py), which fabric/diags.py passes here. At the cap memory holds what was read
  and its decoded text, never a third copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence

from fabric.errors import FabricError

# What each tool may print before it is killed: sized from the largest fabric the project plans burn-in on
# (Selene, 666 switches and ~4.3k HCAs: docs/performance.md), with room for a fabric twice its size. A larger
# fabric raises them with the site file's setting below.
MAX_OUTPUT_SETTING = "fabric.diags.max_output_mib"
IBNETDISCOVER_MAX_OUTPUT = 32 << 20  # a block per node, a line per port: Selene's is 2.8 MB, linear in ports
IBLINKINFO_MAX_OUTPUT = 32 << 20  # a line per port: Selene's ~32k ports print ~4 MB, linear in ports
DUMP_LFTS_MAX_OUTPUT = 1 << 30  # a line per LID per switch: Selene's is 227 MB; twice the fabric prints ~4x that
PERFQUERY_MAX_OUTPUT = 1 << 20  # one switch's ports (`-l <lid> 255`): ~1 KB of counters a port, at most 254 ports
IBPORTSTATE_MAX_OUTPUT = 64 << 10  # one port's state, width and speeds: ~1 KB
OTHER_TOOL_MAX_OUTPUT = 16 << 20  # a tool without a cap of its own (ibroute: a line per LID of one switch)
TOOL_MAX_OUTPUT = {"ibnetdiscover": IBNETDISCOVER_MAX_OUTPUT, "iblinkinfo": IBLINKINFO_MAX_OUTPUT,
                   "dump_lfts": DUMP_LFTS_MAX_OUTPUT, "perfquery": PERFQUERY_MAX_OUTPUT,
                   "ibportstate": IBPORTSTATE_MAX_OUTPUT}
STDERR_TAIL = 64 * 1024
_CHUNK = 1 << 16


class ToolOutputTooLarge(FabricError):
    """The tool printed more than the caller's cap: it was killed and nothing it printed is used."""


def max_output_of(tool: str, site_caps: Mapping[str, int] | None = None) -> int:
    """The cap in bytes on what `tool` (its name or path, without a site's prefix) may print: the site's own
    (`site_caps`, by tool name, from `fabric.diags.max_output_mib`) else the built-in one."""
    name = os.path.basename(tool)
    if site_caps is not None and name in site_caps:
        return site_caps[name]
    return TOOL_MAX_OUTPUT.get(name, OTHER_TOOL_MAX_OUTPUT)


def _too_large(argv: Sequence[str], tool: str, max_output: int) -> ToolOutputTooLarge:
    name = os.path.basename(tool)
    cap = f"{max_output >> 20} MiB" if max_output >= 1 << 20 else f"{max_output} bytes"
    return ToolOutputTooLarge(
        f"{name} printed more than its cap of {cap} and was killed, nothing it printed used ({' '.join(argv)}); "
        f"if this fabric's size warrants more, raise it in the site file: {MAX_OUTPUT_SETTING}: {{{name}: <MiB>}}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the tool and anything it started


def _collect(proc: subprocess.Popen[bytes], argv: Sequence[str], deadline: float, timeout_s: float,
             max_output: int, tool: str) -> tuple[bytearray, bytearray]:
    """stdout (up to `max_output`) and stderr's tail until both reach EOF; TimeoutExpired at the deadline."""
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(list(argv), timeout_s)
            for key, _events in sel.select(left):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf: bytearray = key.data
                buf += chunk
                if buf is out and len(out) > max_output:
                    raise _too_large(argv, tool, max_output)
                if buf is err and len(err) > STDERR_TAIL:
                    del err[:len(err) - STDERR_TAIL]
    return out, err


def run_tool(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
             max_output: int = OTHER_TOOL_MAX_OUTPUT, tool: str | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` with `env` added to ours, its output as text. Raises what `subprocess.run` does when the tool
    cannot be started (FileNotFoundError, PermissionError) or outlives `timeout_s` (subprocess.TimeoutExpired),
    and ToolOutputTooLarge past `max_output` bytes of stdout; in both latter cases its process group is killed.
    `tool`: the infiniband-diags tool `argv` runs, where a site's prefix comes first (default: `argv[0]`)."""
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="ibtool-") as scratch:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=scratch, env={**os.environ, **env},
                                start_new_session=True)
        with proc:
            try:
                out, err = _collect(proc, argv, deadline, timeout_s, max_output, tool or argv[0])
                rc = proc.wait(max(deadline - time.monotonic(), 0.001))
            except BaseException:
                _kill_group(proc)
                proc.wait()
                raise
    return subprocess.CompletedProcess(list(argv), rc, out.decode(errors="replace"), err.decode(errors="replace"))


async def run_tool_async(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                         max_output: int = OTHER_TOOL_MAX_OUTPUT,
                         tool: str | None = None) -> subprocess.CompletedProcess[str]:
    """`run_tool` off the event loop (a worker thread waits for the tool)."""
    return await asyncio.to_thread(run_tool, argv, env, timeout_s, max_output, tool)
