"""Fabric faults the simulated UFM plays into ibsim (read from the site's `ufm-faults.yml`).

    flap:   cables that are unplugged and plugged again `times` times when the lab starts (329, then 702)
      - {node: leaf-A-r3-U38, port: 3, times: 3}
    ber:    ports whose symbol errors keep rising, per minute (110 threshold events on every poll)
      - {node: leaf-A-r3-U36, port: 10, per_min: 600}

Nodes are design names (switches); the UFM sees the results only through the real tools, as it would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from fabric.design import load_design
from fabric.topology import End


class View(Protocol):
    def console(self, command: str) -> None: ...
    def poll(self) -> None: ...


@dataclass(frozen=True)
class Flap:
    sim_id: str
    port: int
    times: int


@dataclass
class Ber:
    sim_id: str
    port: int
    per_min: float
    value: float = 0.0


@dataclass
class Faults:
    flaps: list[Flap] = field(default_factory=list)
    bers: list[Ber] = field(default_factory=list)

    def start(self, view: View) -> None:
        for flap in self.flaps:
            for _ in range(flap.times):
                view.console(f'Unlink "{flap.sim_id}"[{flap.port}]')
                time.sleep(0.05)
                view.poll()
                view.console(f'ReLink "{flap.sim_id}"[{flap.port}]')
                time.sleep(0.05)
                view.poll()
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
    from fabric.asbuilt import AsBuilt

    built = AsBuilt.from_design(load_design(design_path))
    return {name: built.sim_id(name) for name in built.nodes}


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
    return out


__all__ = ["Ber", "End", "Faults", "Flap", "load_faults"]
