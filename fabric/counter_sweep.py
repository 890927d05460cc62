"""The one live counter sweep: every port of every switch read with `perfquery`, for the port plan (two sweeps
apart give rates) and the burn-in (each stage's links before and after).

A switch is one `perfquery -l <lid> 255` (every port's error counters) and, when asked, one
`perfquery -x -l <lid> 255` (its data counters). Switches are read concurrently, at most `concurrency` at
once, each tool run under its own deadline. A switch that does not answer in time, fails or prints what
cannot be read is listed with why, and its ports are unknown, never zero: the rest of the sweep stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from fabric.errors import FabricError
from fabric.ports.counters import CounterSweep, parse_perfquery
from fabric.topology import End
from fabric.ufm.events import Rejected

# runs one tool: its stdout, or FabricError (missing, failed, late, too much output)
RunTool = Callable[[Sequence[str], float], Awaitable[str]]
CONCURRENCY = 8


@dataclass(frozen=True)
class SwitchCounters:
    taken_at: datetime
    values: Mapping[End, Mapping[str, int]]  # switch port -> counter -> value
    failed: Mapping[str, str]  # switch GUID -> why its counters could not be read

    def as_sweep(self, source: str = "perfquery (live)") -> CounterSweep:
        """A GUID-keyed sweep for the port plan; each switch that could not be read is a rejected input."""
        rejected = tuple(Rejected(source, None, f"switch 0x{guid}: {why}") for guid, why in sorted(self.failed.items()))
        return CounterSweep(source, self.taken_at, self.values, by_lid=False, complete=True, rejected=rejected)


async def sweep_switches(run: RunTool, switches: Iterable[tuple[str, int]], timeout_s: float, *,
                         data: bool = False, concurrency: int = CONCURRENCY) -> SwitchCounters:
    """Every port of every (switch GUID, LID): error counters, and data counters too when `data`."""
    gate = asyncio.Semaphore(concurrency)
    taken = datetime.now(UTC)
    values: dict[End, Mapping[str, int]] = {}
    failed: dict[str, str] = {}

    async def one(guid: str, lid: int) -> None:
        async with gate:
            try:
                text = await run(["perfquery", "-l", str(lid), "255"], timeout_s)
                if data:
                    text += await run(["perfquery", "-x", "-l", str(lid), "255"], timeout_s)
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
    return SwitchCounters(taken, values, failed)
