"""`provision anomalies --run-dir RUN`: a training job's diagnoses (RUN/anomalies.jsonl, written by the job's
rank 0) into the state-store history of the hosts they name, once each; labels (checkpoint) are not. A
link diagnosis carries the suspect host's HCA port counters from the store (`report/anomaly_evidence.py`).
`--port-evidence h1,h2` (the supervisor, before each attempt): those hosts' HCA port counters into
RUN/evidence.json, which the job's diagnosis reads to name the host behind a link pattern."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.options import Common
from provision.command.output import console, emit_json
from provision.errors import UnknownHost
from provision.site.bounded import read_text
from provision.state.notes import note
from report.anomaly_evidence import LINK_KINDS, hca_port_evidence, write_port_evidence

MAX_BYTES = 16 << 20
REASON = "training_anomaly"


def alerts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "anomalies.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in read_text(path, limit=MAX_BYTES, what="job anomalies").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("alert") and isinstance(row.get("hosts"), list):
            out.append(row)
    return out


@app.command()
@common_options
def anomalies(
    run_dir: Annotated[Path, typer.Option("--run-dir", help="The training run's folder.")],
    port_evidence: Annotated[str, typer.Option(
        "--port-evidence", help="Comma-separated job hosts: write their HCA port counters (latest burn-in, port "
        "ledger) into RUN/evidence.json for the job's diagnosis.")] = "",
    *,
    common: Common,
) -> None:
    """Record the job's alerts in the history of each suspect host (kind, steps, evidence, the run)."""
    ctx = Context.of(common)
    rows = alerts(run_dir)
    job_hosts = [h for h in port_evidence.split(",") if h]
    link_hosts = {str(h) for r in rows if r.get("kind") in LINK_KINDS for h in r["hosts"]}
    ports = hca_port_evidence(ctx.store, [*job_hosts, *link_hosts]) if job_hosts or link_hosts else {}
    if job_hosts:
        write_port_evidence(run_dir, {h: e for h, e in ports.items() if h in job_hosts})
    recorded: list[str] = []
    unknown: list[str] = []
    for row in rows:
        for host in [str(h) for h in row["hosts"]]:
            evidence = {"kind": row.get("kind"), "steps": row.get("steps"), "level": row.get("level"),
                        "evidence": row.get("evidence"), "run": str(run_dir.resolve()), "at": row.get("time")}
            if row.get("kind") in LINK_KINDS and host in ports:
                evidence["hca_ports"] = ports[host]
            try:
                seen = any(e.reason == REASON and isinstance(e.evidence, dict) and e.evidence.get("at") == row.get(
                    "time") and e.evidence.get("kind") == row.get("kind") for e in ctx.store.history(host))
                if not seen:
                    note(ctx.store, host, reason=REASON, command="anomalies", evidence=evidence)
                    recorded.append(f"{host}:{row.get('kind')}")
            except UnknownHost:
                unknown.append(host)
    payload = {"recorded": recorded, "not_in_store": sorted(set(unknown)),
               "port_evidence": sorted(h for h in ports if h in job_hosts)}
    if common.json_out:
        emit_json(payload)
    else:
        console.print(f"{len(recorded)} anomaly entries recorded" + (
            f"; not in the state store: {', '.join(payload['not_in_store'])}" if unknown else ""))
