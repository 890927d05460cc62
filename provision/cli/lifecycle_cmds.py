"""Lifecycle commands: status, history, mark, record, golden."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.app import app, common_options
from provision.command.context import Context
from provision.command.options import Common, JsonOpt
from provision.command.output import console, emit_json, esc
from provision.errors import BringupError
from provision.firmware.table import read_rows, version_spread
from provision.hostfiles import HostfileFormat, golden_hosts, held_back, render_hostfile
from provision.site.bounded import MAX_EVIDENCE_BYTES, InputRefused, read_text
from provision.state import HostRecord, State, parse_state
from provision.state.intents import hosts_in_flight, in_flight_line
from provision.state.lifecycle import FLOW
from provision.state.peer_text import shown
from provision.steps.pipeline import ALL_STEPS, PIPELINE
from provision.steps.spec import StepSpec


def _ts(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def status_payload(ctx: Context, records: list[HostRecord]) -> dict[str, Any]:
    in_site = [r for r in records if r.in_site]
    by_state = Counter(r.state.value for r in in_site)
    by_rack: dict[str, Counter[str]] = {}
    for r in in_site:
        by_rack.setdefault(r.rack, Counter())[r.state.value] += 1
    failed = [
        {
            "host": r.hostname,
            "rack": r.rack,
            "reason": r.reason,
            "failed_while": r.resume_from.value if r.resume_from else None,
            "since": _ts(r.updated_at),
        }
        for r in in_site
        if r.state is State.failed
    ]
    return {
        "site": ctx.index.name,
        "state_db": str(ctx.store.path),
        "hosts": len(in_site),
        "by_state": {s.value: by_state.get(s.value, 0) for s in State},
        "by_rack": {rack: dict(sorted(c.items())) for rack, c in by_rack.items()},
        "failed": failed,
        "not_in_site": [r.hostname for r in records if not r.in_site],
        "firmware_versions": version_spread(read_rows(ctx.store).values()),  # per component kind (#40)
        # changes asked of a BMC or MAAS and not recorded yet: their hosts are never golden meanwhile
        "in_flight": {host: in_flight_line(i) for host, i in sorted(hosts_in_flight(ctx.store).items())},
    }


def _render_status(payload: dict[str, Any]) -> None:
    from rich.table import Table

    console.print(f"[bold]{esc(payload['site'])}[/]: {payload['hosts']} hosts  ([dim]{esc(payload['state_db'])}[/])")
    states = [st.value for st in State if payload["by_state"][st.value]]
    table = Table(title="hosts per state", title_justify="left")
    table.add_column("state")
    table.add_column("hosts", justify="right")
    for s in State:
        n = payload["by_state"][s.value]
        if n:
            style = "red" if s is State.failed else ("green" if s is State.golden else "")
            table.add_row(f"[{style}]{s.value}[/]" if style else s.value, str(n))
    console.print(table)

    racks = Table(title="per rack", title_justify="left")
    racks.add_column("rack")
    for name in states:
        racks.add_column(name, justify="right")
    for rack, c in payload["by_rack"].items():
        racks.add_row(esc(rack), *[str(c.get(name, "")) for name in states])
    console.print(racks)

    if payload["failed"]:
        failed = Table(title="failed hosts", title_justify="left")
        for col in ("host", "rack", "reason", "failed while", "since"):
            failed.add_column(col)
        for f in payload["failed"]:
            failed.add_row(
                esc(f["host"]), esc(f["rack"]), f"[red]{esc(f['reason'])}[/]", f["failed_while"] or "", f["since"]
            )
        console.print(failed)
    if payload.get("firmware_versions"):
        spread = Table(title="firmware versions (hosts per version)", title_justify="left")
        spread.add_column("component")
        spread.add_column("versions")
        for kind, versions in payload["firmware_versions"].items():
            line = ", ".join(f"{esc(v)} ({n})" for v, n in versions.items())
            spread.add_row(esc(kind), f"[yellow]{line}[/]" if len(versions) > 1 else line)
        console.print(spread)
    for host, line in payload["in_flight"].items():
        console.print(f"[yellow]in flight[/] {esc(host)}: {esc(line)}")
    if payload["not_in_site"]:
        gone = ", ".join(esc(host) for host in payload["not_in_site"])
        console.print(f"[yellow]in the state store but no longer in the site:[/] {gone}")


@app.command()
@common_options
def status(*, common: Common) -> None:
    """Hosts per lifecycle state, per rack, and the failed hosts with their reasons."""
    ctx = Context.of(common)
    payload = status_payload(ctx, ctx.store.hosts())
    if common.json_out:
        emit_json(payload)
    else:
        _render_status(payload)


@app.command()
@common_options
def history(
    host: Annotated[str, typer.Argument(help="Host name as in the site file.")],
    *,
    common: Common,
) -> None:
    """Every recorded event of one host, oldest first."""
    ctx = Context.of(common)
    events = ctx.store.history(host)
    if common.json_out:
        emit_json(
            [
                {
                    "id": e.id,
                    "time": _ts(e.ts),
                    "ts": e.ts,
                    "from": e.from_state.value if e.from_state else None,
                    "to": e.to_state.value,
                    "command": e.command,
                    "reason": e.reason,
                    "actor": e.actor,
                    "override": e.override,
                    "evidence": e.evidence,
                }
                for e in events
            ]
        )
        return
    from rich.table import Table

    table = Table(title=f"history of {esc(host)}", title_justify="left")
    for col in ("time", "from", "to", "command", "reason", "actor"):
        table.add_column(col)
    for e in events:
        to = f"[red]{e.to_state.value}[/]" if e.to_state is State.failed else e.to_state.value
        reason = esc(e.reason or "") + (" [yellow](override)[/]" if e.override else "")
        table.add_row(_ts(e.ts), e.from_state.value if e.from_state else "", to, esc(e.command), reason, esc(e.actor))
    console.print(table)


@app.command()
@common_options
def mark(
    host: Annotated[str, typer.Argument(help="Host name as in the site file.")],
    state: Annotated[str, typer.Argument(help=f"Target state: {', '.join(s.value for s in State)}.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (required; recorded in the history).")],
    *,
    common: Common,
) -> None:
    """Operator override: put a host in any state, recorded as an override with its reason."""
    ctx = Context.of(common)
    outcome = ctx.store.mark(host, parse_state(state), reason=reason)
    if common.json_out:
        emit_json({"host": host, "from": outcome.before.value, "to": outcome.after.value, "override": True})
    else:
        console.print(f"{esc(host)}: {outcome.before.value} → {outcome.after.value} (override: {esc(reason)})")


@app.command()
@common_options
def record(
    host: Annotated[str, typer.Argument(help="Host name as in the site file.")],
    state: Annotated[str, typer.Argument(help="Target state (a validated move, not an override).")],
    command: Annotated[str, typer.Option("--command", help="What did the work, e.g. 'site.yml'.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Machine-readable reason (failed only).")] = None,
    evidence_file: Annotated[
        Path | None, typer.Option("--evidence-file", help="JSON file of evidence, or - for stdin.")
    ] = None,
    *,
    common: Common,
) -> None:
    """Record a validated lifecycle move from a script or playbook (no-op when already reached)."""
    evidence: Any = None
    if evidence_file is not None:
        try:
            if str(evidence_file) == "-":
                raw = sys.stdin.read(MAX_EVIDENCE_BYTES + 1)
                if len(raw) > MAX_EVIDENCE_BYTES:
                    raise InputRefused(f"more than {MAX_EVIDENCE_BYTES} bytes on standard input")
            else:
                raw = read_text(evidence_file, limit=MAX_EVIDENCE_BYTES, what="evidence file")
            evidence = json.loads(raw)
        except (OSError, ValueError, InputRefused) as exc:
            raise BringupError(f"evidence {evidence_file}: not readable JSON ({exc})") from None
    ctx = Context.of(common)
    outcome = ctx.store.transition(host, parse_state(state), command=command, reason=reason, evidence=evidence)
    if common.json_out:
        emit_json(
            {"host": host, "from": outcome.before.value, "to": outcome.after.value, "changed": outcome.changed}
        )
    elif outcome.changed:
        console.print(f"{esc(host)}: {outcome.before.value} → {outcome.after.value}")
    else:
        console.print(f"{esc(host)}: already {outcome.after.value}, nothing to do")


@app.command()
@common_options
def golden(
    fmt: Annotated[HostfileFormat, typer.Option("--format", help="Hostfile flavour.")] = HostfileFormat.plain,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file instead of stdout.")] = None,
    rdzv_port: Annotated[int, typer.Option("--rdzv-port", min=1, max=65535,
                                           help="torchrun format: the rendezvous port on the first host.")] = 29500,
    *,
    common: Common,
) -> None:
    """The golden hostfile: hosts that passed health and burn-in, for training jobs."""
    ctx = Context.of(common)
    hosts = golden_hosts(ctx.index, ctx.store)
    waiting = held_back(ctx.store)
    if common.json_out:
        emit_json({"site": ctx.index.name, "hosts": [h.__dict__ for h in hosts], "gpus": sum(h.gpus for h in hosts),
                   "held_back": waiting})
        return
    for host, why in waiting.items():
        sys.stderr.write(shown(f"left out: {host}: {why}") + "\n")
    text = render_hostfile(hosts, fmt, rdzv_port=rdzv_port)
    if output is not None:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {len(hosts)} golden hosts to {esc(output)}", style="dim")
    else:
        sys.stdout.write(text)
    if not hosts:
        sys.stderr.write(f"no golden hosts yet in {ctx.index.name} (hosts earn it through health and burn-in)\n")


__all__ = ["FLOW", "status_payload"]


def spec_json(spec: StepSpec) -> dict[str, Any]:
    return {"step": spec.name, "run_by": spec.run_by, "summary": spec.summary,
            "takes": [s.value for s in spec.takes], "moves_to": [s.value for s in spec.moves_to],
            "reads": list(spec.reads), "writes": list(spec.writes), "reasons": dict(spec.reasons),
            "concurrency": spec.concurrency, "host_timeout_s": spec.host_timeout_s}


@app.command()
def steps(json_out: JsonOpt = False) -> None:
    """Every lifecycle step in order: the states it takes and moves hosts to, the facts it reads and writes,
    and its failure reasons with what to do about each."""
    rows = [spec_json(s) for s in (*PIPELINE, *(s for s in ALL_STEPS if s not in PIPELINE))]
    if json_out:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table(title="the bring-up, step by step", title_justify="left")
    for col in ("step", "takes", "moves to", "reads", "writes", "failure reasons"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(f"[bold]{esc(r['step'])}[/]\n[dim]{esc(r['run_by'])}[/]", ", ".join(r["takes"]) or "-",
                      " → ".join(r["moves_to"]) or "(no move)", ", ".join(r["reads"]) or "-",
                      ", ".join(r["writes"]) or "-", ", ".join(esc(k) for k in r["reasons"]) or "-")
    console.print(table)
    console.print("any step ─► failed(reason, evidence) ─► (repaired) ─► back into the flow where it stopped",
                  style="dim")
