"""The datacenter worklist: one row per finding, at the device a technician walks to, sorted by row/rack/U."""

from __future__ import annotations

from collections.abc import Iterable

from fabric.findings import FEnd, Finding
from provision.state.peer_text import csv_text

COLUMNS = ["row", "rack", "u", "device", "port", "kind", "action", "peer", "peer_port", "peer_location", "cable",
           "expected", "seen"]
_NOWHERE: tuple[object, ...] = (((10**9, "~"),), (), 10**9)


def _name(e: FEnd | None) -> str:
    if e is None:
        return ""
    return e.name or (f"0x{e.guid}" if e.guid else "")


def _sort_key(f: Finding) -> tuple[tuple[object, ...], str, int]:
    here = f.where()
    loc = here.location if here else None
    return (loc.sort_key() if loc else _NOWHERE, _name(here), (here.port or 0) if here else 0)


def worklist_rows(findings: Iterable[Finding]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for f in sorted(findings, key=_sort_key):
        here = f.where()
        peer = f.b if here is f.a else f.a
        loc = here.location if here else None
        rows.append({
            "row": loc.row if loc else "",
            "rack": loc.rack if loc else "",
            "u": loc.u if loc and loc.u is not None else "",
            "device": _name(here) if here else "(fabric)",
            "port": here.port if here and here.port is not None else "",
            "kind": f.kind,
            "action": f.fix,
            "peer": _name(peer),
            "peer_port": peer.port if peer and peer.port is not None else "",
            "peer_location": str(peer.location) if peer and peer.location else "",
            "cable": f.cable or "",
            "expected": f.expected,
            "seen": f.seen,
        })
    return rows


def worklist_csv(findings: Iterable[Finding]) -> str:
    return csv_text(COLUMNS, worklist_rows(findings))
