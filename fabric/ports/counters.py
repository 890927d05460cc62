"""Port error counters from `perfquery` / `perfquery -x` and `ibqueryerrors`, and their rate between sweeps.

A counter's value says how many errors a port has had since the counter was last cleared, which may be
months: alone it condemns nothing. Two sweeps give a rate per hour. A counter lower in the second sweep
was reset in between (`perfquery -R`, a switch reboot): it is reported as a reset, never as a negative rate.

perfquery (infiniband-diags) prints a block per port, `# Port counters: Lid 1 port 5 (CapMask: ...)` or
`# Port extended counters: ...`, then `Name:.....value` lines; it names the port by LID, so a sweep is
mapped to GUIDs through the topology's LIDs. ibqueryerrors prints `Errors for 0x<guid> "<desc>"` and
`GUID 0x<guid> port N: [SymbolErrorCounter == 40] ...` for the ports above its thresholds (so a port
missing from a sweep had fewer than the threshold). A sweep's time is its first line when that line is a
timestamp (`date -Is > sweep.txt; perfquery ... >> sweep.txt`), else whoever reads the file gives it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from fabric.parsers.common import norm_guid, split_lines
from fabric.topology import End, Topology
from fabric.ufm.events import Rejected

# counter -> the name every source uses for it (perfquery -x spells a few differently)
COUNTERS = {
    "SymbolErrorCounter": "symbol_errors",
    "SymbolErrors": "symbol_errors",
    "LinkDownedCounter": "link_downed",
    "LinkDowned": "link_downed",
    "PortRcvErrors": "rcv_errors",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkErrorRecovery": "link_error_recovery",
    "PortRcvRemotePhysicalErrors": "rcv_remote_physical_errors",
    "PortXmitDiscards": "xmit_discards",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
}
_PQ_HEAD = re.compile(r"^# Port (?:extended )?counters: Lid (\d+) port (\d+)")
_PQ_VALUE = re.compile(r"^(\w+):\.*(\d+|0x[0-9a-fA-F]+)\s*$")
_IQE_PORT = re.compile(r"^GUID 0x([0-9a-fA-F]+) port (\d+|ALL):\s*(.*)$")
_IQE_VALUE = re.compile(r"\[(\w+) == (\d+)\]")


@dataclass(frozen=True)
class CounterSweep:
    source: str
    taken_at: datetime | None
    values: Mapping[End, Mapping[str, int]]  # port -> counter name (COUNTERS' values) -> value
    by_lid: bool  # perfquery: ports are End(f"lid-{lid}", port) until `resolve_lids`
    complete: bool  # every swept port is listed (perfquery) or only those above a threshold (ibqueryerrors)
    rejected: tuple[Rejected, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterRate:
    end: End
    counter: str
    before: int
    after: int
    hours: float
    per_hour: float | None  # None when the counter was reset between the sweeps
    reset: bool

    def describe(self) -> str:
        if self.reset:
            return (f"{self.counter} went from {self.before} to {self.after} over {self.hours:.2f} h: the counter "
                    "was reset in between, rate unknown")
        return f"{self.counter} +{self.after - self.before} in {self.hours:.2f} h ({self.per_hour:.1f}/h)"


def _taken_at(first: str) -> datetime | None:
    try:
        return datetime.fromisoformat(first.strip())
    except ValueError:
        return None


def parse_perfquery(text: str, source: str = "perfquery") -> CounterSweep:
    lines = split_lines(text, source)
    taken = _taken_at(lines[0]) if lines else None
    values: dict[End, dict[str, int]] = {}
    rejected: list[Rejected] = []
    current: dict[str, int] | None = None
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or (no == 1 and taken is not None):
            continue
        head = _PQ_HEAD.match(s)
        if head:
            current = values.setdefault(End(f"lid-{int(head.group(1))}", int(head.group(2))), {})
            continue
        m = _PQ_VALUE.match(s)
        if m and current is not None:
            name = COUNTERS.get(m.group(1))
            if name is not None:
                current[name] = max(current.get(name, 0), int(m.group(2), 0))
            continue
        if not s.startswith("#"):
            rejected.append(Rejected(source, no, "not a perfquery line (truncated or garbled)", s))
    return CounterSweep(source, taken, values, by_lid=True, complete=True, rejected=tuple(rejected))


def parse_ibqueryerrors(text: str, source: str = "ibqueryerrors") -> CounterSweep:
    lines = split_lines(text, source)
    taken = _taken_at(lines[0]) if lines else None
    values: dict[End, dict[str, int]] = {}
    rejected: list[Rejected] = []
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or s.startswith(("##", "Errors for")) or (no == 1 and taken is not None):
            continue
        m = _IQE_PORT.match(s)
        if m is None:
            rejected.append(Rejected(source, no, "not an ibqueryerrors line (truncated or garbled)", s))
            continue
        if m.group(2) == "ALL":  # the node's sum over its ports, not a port
            continue
        end = End(norm_guid(m.group(1))[0], int(m.group(2)))
        counters = values.setdefault(end, {})
        for raw, value in _IQE_VALUE.findall(m.group(3)):
            name = COUNTERS.get(raw)
            if name is not None:
                counters[name] = int(value)
    return CounterSweep(source, taken, values, by_lid=False, complete=False, rejected=tuple(rejected))


def parse_counters(text: str, source: str) -> CounterSweep:
    """perfquery or ibqueryerrors output, told apart by what it says."""
    if "# Port counters:" in text or "# Port extended counters:" in text:
        return parse_perfquery(text, source)
    return parse_ibqueryerrors(text, source)


def resolve_lids(sweep: CounterSweep, topology: Topology) -> tuple[CounterSweep, tuple[Rejected, ...]]:
    """A perfquery sweep keyed by GUID through the topology's LIDs; ports of unknown LIDs are set apart."""
    if not sweep.by_lid:
        return sweep, ()
    guid_of = {n.lid: n.guid for n in topology.nodes.values() if n.lid is not None}
    values: dict[End, Mapping[str, int]] = {}
    apart: list[Rejected] = []
    for end, counters in sweep.values.items():
        lid = int(end.guid.removeprefix("lid-"))
        guid = guid_of.get(lid)
        if guid is None:
            apart.append(Rejected(sweep.source, None, f"LID {lid} port {end.port}: no node of the discovered "
                                  "fabric has this LID (a capture from another time?)"))
            continue
        values[End(guid, end.port)] = counters
    swept = CounterSweep(sweep.source, sweep.taken_at, values, False, sweep.complete, sweep.rejected)
    return swept, tuple(apart)


def counter_rates(before: CounterSweep, after: CounterSweep) -> tuple[CounterRate, ...]:
    """Per port and counter, the change between two sweeps (GUID-keyed, `after` taken later)."""
    if before.taken_at is None or after.taken_at is None:
        raise ValueError("both sweeps need the time they were taken")
    hours = (after.taken_at - before.taken_at).total_seconds() / 3600
    rates: list[CounterRate] = []
    for end, now in after.values.items():
        then = before.values.get(end)
        if then is None and before.complete:
            continue  # the port was not swept the first time: no rate
        for counter, value in now.items():
            old = (then or {}).get(counter, 0)  # below ibqueryerrors' threshold the first time: from 0
            if value == old:
                continue
            reset = value < old
            rates.append(CounterRate(end, counter, old, value, hours, None if reset else (value - old) / hours,
                                     reset))
    return tuple(sorted(rates, key=lambda r: (r.end, r.counter)))
