"""Prometheus scrape targets generated from the state store, as `file_sd_configs` files.

One JSON file per job in a directory Prometheus watches (roles/prometheus_server/templates/prometheus.yml.j2):
- `node.json`: the node exporter of every host that has an OS address (MAAS deploy learns it: the host
  fact `os_address`), except the controller, whose exporter Prometheus scrapes as job `bringup` (its
  textfiles carry the stage and lifecycle metrics of every host, so it gets no `host` label of its own);
- `dcgm.json`: dcgm-exporter on every GPU host that site.yml configured (it installs DCGM), failed or not;
- `training.json`: the node exporter of every golden host, whose textfile collector serves the training
  job's metrics (training/monitor.py) to a job of their own.

Every target carries `host`, `rack` and `role` labels, so an alert names the host whatever exporter saw it.
Files are rewritten atomically and only when their content changes (Prometheus re-reads on change).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.state import HostRecord, State, StateStore, reached
from tools.health.textfile import write_atomically

JOBS = ("node", "dcgm", "training")


@dataclass(frozen=True)
class TargetHost:
    hostname: str
    rack: str
    role: str  # gpu | controller | ... (the site's host role)
    record: HostRecord
    address: str | None  # the OS address the host answers on


@dataclass(frozen=True)
class Ports:
    node: int = 9100
    dcgm: int = 9400


def _configured(record: HostRecord) -> bool:
    if record.state is State.failed:
        return record.resume_from is not None and reached(record.resume_from, State.configured)
    return reached(record.state, State.configured)


def _group(host: TargetHost, port: int) -> dict[str, Any]:
    address = f"[{host.address}]" if host.address and ":" in host.address else host.address
    return {"targets": [f"{address}:{port}"], "labels": {"host": host.hostname, "rack": host.rack, "role": host.role}}


def scrape_targets(hosts: Iterable[TargetHost], ports: Ports = Ports()) -> dict[str, list[dict[str, Any]]]:
    """job -> file_sd target groups, in host order."""
    out: dict[str, list[dict[str, Any]]] = {job: [] for job in JOBS}
    for h in hosts:
        if not h.address or h.role == "controller":
            continue
        out["node"].append(_group(h, ports.node))
        if h.role == "gpu" and _configured(h.record):
            out["dcgm"].append(_group(h, ports.dcgm))
        if h.role == "gpu" and h.record.state is State.golden:
            out["training"].append(_group(h, ports.node))
    return out


def target_hosts(store: StateStore, declared: Iterable[tuple[str, str, str]]) -> list[TargetHost]:
    """The site's hosts (hostname, rack, role) with their records and OS addresses from the store."""
    declared = list(declared)
    facts = store.facts_many([name for name, _r, _role in declared])
    records = {r.hostname: r for r in store.hosts()}
    return [TargetHost(name, rack, role, records[name], facts[name].os_address) for name, rack, role in declared]


def write_targets(directory: Path, groups: Mapping[str, list[dict[str, Any]]]) -> dict[str, bool]:
    """Write `<job>.json` for each job; job -> whether its file changed."""
    changed = {}
    for job, entries in groups.items():
        path = directory / f"{job}.json"
        text = json.dumps(entries, indent=2, sort_keys=True) + "\n"
        data = text.encode()
        try:
            with path.open("rb") as fh:  # bounded: one byte past what it should hold
                same = fh.read(len(data) + 1) == data
        except OSError:
            same = False
        if not same:
            write_atomically(path, text)
        changed[job] = not same
    return changed
