"""What each `fabric` command prints and the files it writes: one renderer per command, `--json` or text.

Text from the fabric (node descriptions in findings, unplaced devices) goes through
`provision.state.peer_text.shown` and, printed by rich, as `Text`: its escapes and `[...]` are shown, not run.

rich is imported only by the validation report's text form.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric.errors import FabricError
from provision.state.peer_text import shown
from provision.state.secret_values import mask, mask_tree

if TYPE_CHECKING:
    from fabric.design import Design
    from fabric.identify import Identification
    from fabric.pipeline import Result
    from fabric.topology import Topology

UNPLACED_SHOWN = 10


def emit_json(payload: Any) -> None:
    sys.stdout.write(mask(json.dumps(mask_tree(payload), indent=2, default=str)) + "\n")  # held secrets masked


def warning_line(message: str) -> None:
    sys.stderr.write(f"fabric: warning: {message}\n")


def write_file(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(mask(text), encoding="utf-8")
    except OSError as e:
        raise FabricError(f"{path}: cannot write: {e.strerror or e}") from None


def validation(result: Result, as_json: bool, worklist: Path | None, node_name_map: Path | None) -> None:
    from fabric.worklist import worklist_csv

    if worklist is not None:
        write_file(worklist, worklist_csv(result.report.findings))
    if node_name_map is not None:
        write_file(node_name_map, result.identification.node_name_map(result.design))
    if as_json:
        emit_json(result.report.to_dict())
    else:
        _print_report(result)


def _print_report(result: Result) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True, emoji=False)
    report = result.report
    s: dict[str, Any] = dict(report.summary)
    for f in report.findings:  # node descriptions are peer text: printed as Text, never parsed as markup
        console.print(Text.assemble((f.kind, "bold"), " ", shown(f.line().split(": ", 1)[1])))
    table = Table(title=Text(shown(f"fabric {s['design']} vs {s['discovered_from']}")))
    table.add_column("tier")
    table.add_column("designed links", justify="right")
    table.add_column("findings")
    for tier, row in s["tiers"].items():
        found = ", ".join(f"{k} {n}" for k, n in row["findings"].items()) or "-"
        table.add_row(Text(shown(tier)), str(row["designed_links"]), Text(shown(found)))
    console.print(table)
    sw, ca = s["switches"], s["cas"]
    console.print(f"switches: {sw['placed']}/{sw['designed']} placed ({sw['discovered']} discovered); "
                  f"HCAs: {ca['placed']}/{ca['designed']} placed ({ca['discovered']} discovered); "
                  f"{s['warning_count']} parser warning(s)")
    unplaced = result.identification.unplaced
    for u in unplaced[:UNPLACED_SHOWN]:
        console.print(Text(shown(f"could not place {u.type} 0x{u.guid} \"{u.description}\": {u.reason}")))
    if len(unplaced) > UNPLACED_SHOWN:
        console.print(f"... and {len(unplaced) - UNPLACED_SHOWN} more unplaced (see --json or `fabric identify`)")
    verdict = "clean: cabled as designed" if s["clean"] else f"{s['total_findings']} finding(s)"
    console.print(f"[bold]{verdict}[/bold]")


def identification(design: Design, ident: Identification, as_json: bool, node_name_map: Path | None) -> None:
    text = ident.node_name_map(design)
    if node_name_map is not None:
        write_file(node_name_map, text)
    if as_json:
        emit_json({
            "placed": [{"guid": f"0x{p.guid}", "name": p.name, "how": p.how} for p in ident.by_guid.values()],
            "unplaced": [{"guid": u.guid, "type": str(u.type), "description": u.description, "reason": u.reason}
                         for u in ident.unplaced],
            "notes": list(ident.notes),
        })
        return
    if node_name_map is None:
        sys.stdout.write(text)
    for u in ident.unplaced:
        sys.stdout.write(shown(f"unplaced {u.type} 0x{u.guid} \"{u.description}\": {u.reason}") + "\n")


def capture(top: Topology, as_json: bool) -> None:
    payload = {
        "source": top.source,
        "switches": len(top.switches()),
        "cas": len(top.cas()),
        "links": len(top.links),
        "down_ports": len(top.down_ports),
        "guid_conflicts": [{"guid": c.guid, "evidence": list(c.evidence)} for c in top.conflicts],
        "warnings": list(top.warnings),
    }
    if as_json:
        emit_json(payload)
        return
    for k, v in payload.items():
        if isinstance(v, list):
            for item in v:
                sys.stdout.write(f"{k}: {shown(str(item))}\n")
        else:
            sys.stdout.write(f"{k}: {v}\n")


def _counts(design: Design) -> dict[str, int]:
    return {"switches": len(design.switches()), "cas": len(design.cas()), "links": len(design.links)}


def generated_design(design: Design, described: str, tiers: int, out: Path | None, as_json: bool) -> None:
    """`described`: the generator call that made it, for the file's header."""
    from fabric.design_dump import dump_design

    counts = _counts(design)
    header = (f"Generated by: {described}\n"
              f"{counts['switches']} switches, {counts['cas']} HCAs, {counts['links']} links")
    text = dump_design(design, header)
    if out is not None:
        write_file(out, text)
    summary = {**counts,
               "tiers": {str(t): sum(1 for s in design.switches() if s.tier == t) for t in range(1, tiers + 1)},
               "out": str(out) if out else None}
    if as_json:
        emit_json(summary)
    elif out is None:
        sys.stdout.write(text)
    else:
        sys.stdout.write(f"{out}: {counts['switches']} switches, {counts['cas']} HCAs, {counts['links']} links\n")


def imported_design(design: Design, cabling: Path, out: Path | None, as_json: bool) -> None:
    from fabric.design_dump import dump_design

    text = dump_design(design, f"Imported from {cabling.name} by `fabric design import-csv`")
    if out is not None:
        write_file(out, text)
    if as_json:
        emit_json(_counts(design))
    elif out is None:
        sys.stdout.write(text)


def checked_design(design: Design, path: Path, as_json: bool) -> None:
    counts = _counts(design)
    if as_json:
        emit_json({"ok": True, "design": design.name, **counts})
    else:
        sys.stdout.write(f"{path}: ok: {counts['switches']} switches, {counts['cas']} HCAs, {counts['links']} links\n")
