"""The fabric as the burn-in reads it: live discovery, the switches' forwarding tables and port counters,
through the real infiniband-diags tools as the site reaches them (`fabric.diags`: this host's HCAs, or the
prefix, environment and attachment points the site announces), exactly as `fabric validate --live` does.

Counters come from the one live sweep (`fabric.counter_sweep`: error and data counters of every switch port,
switches read concurrently); a switch that does not answer in time is listed, never read as zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabric import live
from fabric.counter_sweep import CONCURRENCY, SwitchCounters, sweep_switches
from fabric.diags import Diags
from fabric.pipeline import topology_from_texts
from fabric.topology import Topology


@dataclass(frozen=True)
class IbTools:
    """How to run an infiniband-diags tool against this site's fabric."""

    diags: Diags = field(default_factory=Diags)

    @classmethod
    def for_site(cls, site_file: Path | None) -> IbTools:
        return cls(Diags.for_site(site_file))

    async def run(self, argv: Sequence[str], timeout_s: float) -> str:
        """The tool's stdout; FabricError when it is missing, fails, prints more than its cap
        (`fabric.toolrun.max_output_of`) or outlives `timeout_s` (it is killed)."""
        return await self.diags.text(argv, timeout_s)

    def discover(self, timeout_s: float) -> Topology:
        found = live.discover(timeout_s, self.diags)
        return topology_from_texts(list(found.captures))

    def dump_lfts(self, timeout_s: float) -> str:
        return asyncio.run(self.run(["dump_lfts"], timeout_s))


async def read_counters(tools: IbTools, switches: Sequence[tuple[str, int]], timeout_s: float,
                        concurrency: int = CONCURRENCY) -> SwitchCounters:
    """Every port of every (switch GUID, LID): error counters (`perfquery -l`) and data (`perfquery -x -l`)."""
    return await sweep_switches(tools.run, switches, timeout_s, data=True, concurrency=concurrency)
