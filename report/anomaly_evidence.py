"""The fabric's view of a training job's hosts, for the job's diagnosis and for the anomalies recorded in
their history: each host's InfiniBand HCA ports (its `hca_guids` facts) in the latest burn-in run's
per-port counter deltas (`fabric.burnin.history`: what the burn-in's perfquery sweeps before and after
each stage saw rise), and the port ledger's links of those HCAs that are out of service
(`fabric.ports.ledger`). Nothing is read from the fabric here: only what the store already holds. A view across
provision and fabric, so it sits above both with the report (ARCHITECTURE.md's table), used by `provision anomaly`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fabric.burnin.history import History
from fabric.ports.ledger import OUT_OF_SERVICE, Ledger
from fabric.ports.step import guid_hosts
from provision.site.bounded import read_text
from provision.state import StateStore
from provision.state.identifiers import canonical_guid

LINK_KINDS = {"dead_link_or_pcie_x4", "degraded_link_or_cpu", "slow_collectives"}  # diagnoses of a link
EVIDENCE = "evidence.json"
MAX_EVIDENCE_BYTES = 4 << 20


def hca_port_evidence(store: StateStore, hosts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Host -> {"port_counters": counter -> increase summed over its HCA ports, "ports": each port's rise,
    "burnin_run": the run they come from, "links_out_of_service": ledger rows of its HCAs}; hosts without
    HCA GUIDs in their facts, or with nothing on record, are left out."""
    guid_host = guid_hosts(store, hosts)
    out: dict[str, dict[str, Any]] = {}

    def of(host: str) -> dict[str, Any]:
        return out.setdefault(host, {"port_counters": {}, "ports": [], "burnin_run": run,
                                     "links_out_of_service": []})

    history = History(store)
    run = history.latest_run()
    for p in history.ports(run) if run is not None else []:
        host = guid_host.get(canonical_guid(p.guid) or p.guid)
        if host is None or not p.delta:
            continue
        ev = of(host)
        ev["port_counters"][p.counter] = ev["port_counters"].get(p.counter, 0) + p.delta
        ev["ports"].append({"guid": p.guid, "port": p.port, "counter": p.counter, "delta": p.delta,
                            "stage": p.stage})
    for entry in Ledger(store).current().values():
        for host in sorted({guid_host[e.guid] for e in entry.ends if e.guid in guid_host}):
            if entry.state in OUT_OF_SERVICE:
                of(host)["links_out_of_service"].append({"link": entry.link, "ledger_id": entry.id,
                                                         "state": entry.state, "why": entry.why})
    return out


def write_port_evidence(run_dir: Path, evidence: dict[str, dict[str, Any]]) -> Path:
    """The hosts' counters into RUN/evidence.json (`port_counters`, read by the job's diagnosis, and
    `hca_ports`), the supervisor's `health` kept."""
    path = run_dir / EVIDENCE
    old: dict[str, Any] = {}
    if path.is_file():
        try:
            raw = json.loads(read_text(path, limit=MAX_EVIDENCE_BYTES, what="job evidence"))
            old = raw if isinstance(raw, dict) else {}
        except json.JSONDecodeError:
            old = {}
    old["port_counters"] = {h: e["port_counters"] for h, e in evidence.items() if e["port_counters"]}
    old["hca_ports"] = evidence
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(old, sort_keys=True))
    os.replace(tmp, path)
    return path
