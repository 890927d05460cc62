"""`provision anomalies --run-dir RUN`: a training job's diagnoses (RUN/anomalies.jsonl, written by the job's
rank 0) into the state-store history of the hosts they name, once each; labels (checkpoint) are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.app import Common, app, common_options
from provision.cli.context import Context
from provision.cli.output import console, emit_json
from provision.errors import UnknownHost
from provision.site.bounded import read_text
from provision.state.notes import note

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
    *,
    common: Common,
) -> None:
    """Record the job's alerts in the history of each suspect host (kind, steps, evidence, the run)."""
    ctx = Context.of(common)
    recorded: list[str] = []
    unknown: list[str] = []
    for row in alerts(run_dir):
        for host in [str(h) for h in row["hosts"]]:
            evidence = {"kind": row.get("kind"), "steps": row.get("steps"), "level": row.get("level"),
                        "evidence": row.get("evidence"), "run": str(run_dir.resolve()), "at": row.get("time")}
            try:
                seen = any(e.reason == REASON and isinstance(e.evidence, dict) and e.evidence.get("at") == row.get(
                    "time") and e.evidence.get("kind") == row.get("kind") for e in ctx.store.history(host))
                if not seen:
                    note(ctx.store, host, reason=REASON, command="anomalies", evidence=evidence)
                    recorded.append(f"{host}:{row.get('kind')}")
            except UnknownHost:
                unknown.append(host)
    payload = {"recorded": recorded, "not_in_store": sorted(set(unknown))}
    if common.json_out:
        emit_json(payload)
    else:
        console.print(f"{len(recorded)} anomaly entries recorded" + (
            f"; not in the state store: {', '.join(payload['not_in_store'])}" if unknown else ""))
