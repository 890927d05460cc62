"""Fabric faults the simulated UFM plays into ibsim (read from the site's `ufm-faults.yml`).

    flap:   cables that are unplugged and plugged again `times` times when the lab starts (329, then 702)
      - {node: leaf-A-r3-U38, port: 3, times: 3}
    ber:    ports whose symbol errors keep rising, per minute (110 threshold events on every counter sample)
      - {node: leaf-A-r3-U36, port: 10, per_min: 600}
    jobs:   the jobs POST /ufmRest/actions starts (sim/ufm/jobs.py): how long each runs, and jobs on cue
      duration_s: [1, 5]          # seconds, each job its own in this range (or one number; default 1)
      fail:                       # ends "Completed With Errors" with this summary, the port unchanged
        - {node: leaf-A-r3-U38, port: 5, action: disable, times: 1, summary: "..."}
      hang:                       # stays "Running" for ever, the port unchanged
        - {node: leaf-A-r3-U28, port: 14, action: disable, times: 1}
      kill:                       # SIGKILL to the process that POSTed the action (sim/ufm/callers.py)
        - {node: gpu-r1-05/mlx5_1, port: 1, action: disable, times: 1, when: after}
      (`action` and `times` are optional: any action, every time; a kill `when: before` comes on the POST,
      nothing started, `when: after` once the port changed, before the job says Completed: a controller
      that crashed between its change and its record)

Nodes are design names; the UFM sees the results only through the real tools, as it would.
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from fabric.design import load_design
from fabric.topology import End


class View(Protocol):
    def console(self, command: str) -> None: ...
    def poll(self, changed: Collection[End] | None = None) -> None: ...


@dataclass(frozen=True)
class Flap:
    sim_id: str
    port: int
    times: int

    @property
    def end(self) -> End:
        return End(self.sim_id.split("-", 1)[1], self.port)


@dataclass
class Ber:
    sim_id: str
    port: int
    per_min: float
    value: float = 0.0


@dataclass
class JobFault:
    end: End
    fate: str  # fail | hang | kill
    action: str | None = None  # disable | enable | None: any
    times: int | None = None  # None: every time
    summary: str = ""
    when: str = "after"  # kill: before (on the POST, nothing started) | after (the port changed, job not ended)

    def matches(self, end: End, action: str) -> bool:
        return end == self.end and self.action in (None, action) and (self.times is None or self.times > 0)


@dataclass
class JobPlan:
    duration_s: tuple[float, float] = (1.0, 1.0)
    faults: list[JobFault] = field(default_factory=list)

    def duration(self, job_id: int) -> float:
        """Each job's own duration in the range, the same for the same job id on every run."""
        low, high = self.duration_s
        return random.Random(job_id).uniform(low, high)

    def fate(self, end: End, action: str) -> JobFault | None:
        """The fault the next job of `action` on `end` meets (each use counts against `times`)."""
        for fault in self.faults:
            if fault.matches(end, action):
                if fault.times is not None:
                    fault.times -= 1
                return fault
        return None


@dataclass
class Faults:
    flaps: list[Flap] = field(default_factory=list)
    bers: list[Ber] = field(default_factory=list)
    jobs: JobPlan = field(default_factory=JobPlan)

    def start(self, view: View) -> None:
        for flap in self.flaps:
            for _ in range(flap.times):
                view.console(f'Unlink "{flap.sim_id}"[{flap.port}]')
                time.sleep(0.05)
                view.poll({flap.end})
                view.console(f'ReLink "{flap.sim_id}"[{flap.port}]')
                time.sleep(0.05)
                view.poll({flap.end})
        self.tick(view, 6.0)
        if self.bers:
            view.poll()  # the rising counters' first threshold events, before anyone asks

    def tick(self, view: View, seconds: float) -> None:
        for ber in self.bers:
            ber.value += ber.per_min * seconds / 60
            view.console(f'PerformanceSet "{ber.sim_id}"[{ber.port}] PortCounters.SymbolErrorCounter='
                         f'{min(int(ber.value), 0xFFFF)}')


def _sim_ids(design_path: Path | None) -> dict[str, str]:
    if design_path is None:
        return {}
    from sim.asbuilt import AsBuilt

    built = AsBuilt.from_design(load_design(design_path))
    return {name: built.sim_id(name) for name in built.nodes}


def _duration(raw: Any) -> tuple[float, float]:
    low, high = (raw, raw) if isinstance(raw, int | float) else (raw[0], raw[1])
    if not 0 <= float(low) <= float(high):
        raise ValueError(f"jobs.duration_s {raw!r}: expected seconds, or [low, high] with 0 <= low <= high")
    return float(low), float(high)


def _job_plan(data: Any, ids: dict[str, str]) -> JobPlan:
    plan = JobPlan(_duration(data.get("duration_s", 1.0)))
    for fate in ("fail", "hang", "kill"):
        for item in data.get(fate, []) or []:
            guid = ids[item["node"]].split("-", 1)[1]
            times = item.get("times")
            summary = str(item.get("summary") or f"simulated fault (ufm-faults.yml): {fate}")
            when = str(item.get("when", "after"))
            if when not in ("before", "after"):
                raise ValueError(f"jobs.kill when {when!r}: expected before or after")
            plan.faults.append(JobFault(End(guid, int(item["port"])), fate, item.get("action"),
                                        int(times) if times is not None else None, summary, when))
    return plan


def load_faults(path: Path | None, view: Any, design: Path | None = None) -> Faults:
    if path is None or not path.is_file():
        return Faults()
    data = yaml.safe_load(path.read_text()) or {}
    ids = _sim_ids(design or (path.parent / "fabric" / "design.yml"))
    out = Faults()
    for item in data.get("flap", []) or []:
        out.flaps.append(Flap(ids[item["node"]], int(item["port"]), int(item.get("times", 3))))
    for item in data.get("ber", []) or []:
        out.bers.append(Ber(ids[item["node"]], int(item["port"]), float(item["per_min"])))
    out.jobs = _job_plan(data.get("jobs") or {}, ids)
    return out


__all__ = ["Ber", "End", "Faults", "Flap", "JobFault", "JobPlan", "load_faults"]
