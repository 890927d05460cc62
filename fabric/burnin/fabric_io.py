"""The fabric as the burn-in reads it: live discovery, the switches' forwarding tables and port counters,
through the real infiniband-diags tools, here or on the lab's simulated fabric.

On a real site the tools run on this host (its HCAs); on the lab they run through `ibsim-run` against the
fabric announced by its state file (`$BRINGUP_IBSIM_STATE`, else `SitePaths.ibsim_state`), exactly as
`fabric validate --live` finds it (`fabric.live`). A switch's counters come from one `perfquery -l <lid> 255`
(every port's error counters) and one `perfquery -x -l <lid> 255` (its data counters); a switch that does not
answer in time is listed, never read as zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fabric import live
from fabric.errors import DiscoveryError, FabricError
from fabric.pipeline import topology_from_texts
from fabric.ports.counters import parse_perfquery
from fabric.topology import End, Topology

MAX_TOOL_OUTPUT = 256 * 1024 * 1024


@dataclass(frozen=True)
class IbTools:
    """How to run an infiniband-diags tool against this site's fabric."""

    wrapper: tuple[str, ...]  # () here, ("ibsim-run",) on the lab
    env: Mapping[str, str]
    sim_state: Path | None

    @classmethod
    def for_site(cls, site_file: Path | None) -> IbTools:
        state = Path(os.environ[live.SIM_STATE_ENV]) if os.environ.get(live.SIM_STATE_ENV) else None
        if state is None and site_file is not None:
            state = live.lab_state_for_site(site_file)
        if state is None:
            return cls((), {}, None)
        points = live.sim_attachments(state)
        if not points:
            raise DiscoveryError(f"simulated fabric state {state} lists no attachment point")
        env = {k: v for k, v in points[0].env.items() if k == "IBSIM_SOCKNAME"}
        return cls((shutil.which("ibsim-run") or "ibsim-run",), env, state)

    async def run(self, argv: Sequence[str], timeout_s: float) -> str:
        """The tool's stdout; FabricError when it is missing, fails or outlives `timeout_s` (it is killed)."""
        with tempfile.TemporaryDirectory(prefix="ibtool-") as scratch:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.wrapper, *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, cwd=scratch, env={**os.environ, **self.env},
                    start_new_session=True, limit=2**20)
            except FileNotFoundError:
                raise FabricError(f"{argv[0]} not found: install infiniband-diags") from None
            try:
                out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: the tool and anything it started
                await proc.wait()
                raise FabricError(f"{' '.join(argv)} did not answer within {timeout_s:g} s") from None
        if proc.returncode != 0:
            lines = [ln for ln in err.decode(errors="replace").splitlines() if "sim_connect" not in ln]
            raise FabricError(f"{' '.join(argv)} failed (rc {proc.returncode}): {(lines or ['no output'])[-1]}")
        if len(out) > MAX_TOOL_OUTPUT:
            raise FabricError(f"{' '.join(argv)} printed {len(out)} bytes: not read")
        return out.decode(errors="replace")

    def discover(self, site_file: Path | None, timeout_s: float) -> Topology:
        found = live.discover(timeout_s, self.sim_state)
        return topology_from_texts(list(found.captures))

    def dump_lfts(self, timeout_s: float) -> str:
        return asyncio.run(self.run(["dump_lfts"], timeout_s))


@dataclass(frozen=True)
class CounterRead:
    values: Mapping[End, Mapping[str, int]]  # switch port -> counter -> value
    failed: Mapping[str, str]  # switch GUID -> why its counters could not be read


async def read_counters(tools: IbTools, switches: Sequence[tuple[str, int]], timeout_s: float,
                        concurrency: int = 8) -> CounterRead:
    """Every port of every (switch GUID, LID): error counters (`perfquery -l`) and data (`perfquery -x -l`)."""
    gate = asyncio.Semaphore(concurrency)
    values: dict[End, Mapping[str, int]] = {}
    failed: dict[str, str] = {}

    async def one(guid: str, lid: int) -> None:
        async with gate:
            try:
                text = await tools.run(["perfquery", "-l", str(lid), "255"], timeout_s)
                text += await tools.run(["perfquery", "-x", "-l", str(lid), "255"], timeout_s)
            except FabricError as exc:
                failed[guid] = str(exc)
                return
        sweep = parse_perfquery(text, f"perfquery lid {lid}")
        if sweep.rejected or not sweep.values:
            failed[guid] = f"perfquery for LID {lid} printed {len(sweep.rejected)} unreadable line(s)" \
                if sweep.rejected else f"perfquery for LID {lid} printed no port"
            return
        for end, counters in sweep.values.items():
            if end.guid == f"lid-{lid}" and end.port > 0:
                values[End(guid, end.port)] = counters

    await asyncio.gather(*(one(g, lid) for g, lid in switches))
    return CounterRead(values, failed)
