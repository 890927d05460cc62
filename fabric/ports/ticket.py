"""The datacenter ticket for a disabled link: where both ends are, which cable, the evidence, what to replace.

Plain text a technician can act on without the tool: rack and U of each end from the design, the port
(and UFM's label, e.g. 1/17/1, which is what the switch's faceplate shows), the cable's serial from UFM or
the design's cable id, each piece of evidence with its time, and the replacement that evidence points to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabric.ports.ledger import LedgerEnd, LedgerEntry

_BER_CODES = {110, 917, 918}
_FLAP_CODES = {112, 329, 702}


def what_to_replace(evidence: Sequence[Mapping[str, Any]]) -> str:
    codes = {e.get("code") for e in evidence}
    texts = " ".join(str(e.get("text", "")) for e in evidence)
    kinds = {e.get("kind") for e in evidence}
    if codes & _BER_CODES or "symbol_errors" in texts:
        return ("clean and reseat both connectors; if the errors come back, replace the cable, then the "
                "transceiver at the end whose counters rose")
    if codes & _FLAP_CODES or "link_downed" in texts or "FLAPPING" in texts:
        return "reseat both ends; if the link flaps again, replace the cable, then the transceivers"
    if "degraded" in kinds:
        return "replace the cable: the link trained below its design width or speed"
    return "inspect both ends and the cable; replace the cable if in doubt"


def _end_line(e: LedgerEnd) -> str:
    label = f" (faceplate {e.label})" if e.label else ""
    where = e.location or "location not in the design"
    return f"  {'switch' if e.is_switch else 'host  '} {e.name} port {e.port}{label}: {where}"


def ticket_text(ends: Sequence[LedgerEnd], why: str, evidence: Sequence[Mapping[str, Any]],
                cable: str | None, design_cable: str | None, expected: str | None) -> str:
    names = " <-> ".join(f"{e.name}[{e.port}]" for e in ends)
    serial = cable or (f"{design_cable} (design cable id)" if design_cable else "unknown (UFM reports none)")
    lines = [f"Fabric link out of service: {names}", "", "Ends:", *(_end_line(e) for e in ends),
             f"Cable S/N: {serial}"]
    if expected:
        lines.append(f"Design rate: {expected}")
    lines += ["", f"Why: {why}", "Evidence:"]
    for ev in evidence[:20]:
        lines.append(f"  {ev.get('time') or 'now'} {ev.get('source')}: {ev.get('text')}")
    if len(evidence) > 20:
        lines.append(f"  ... {len(evidence) - 20} more (fabric ports list --json)")
    lines += ["", f"Replace: {what_to_replace(evidence)}",
              "When done: fabric ports reenable LINK --repaired (checks the link trains at its design rate "
              "with no errors before it carries traffic)"]
    return "\n".join(lines) + "\n"


def entry_ticket(entry: LedgerEntry) -> str:
    """The ticket of a ledger row: the one written at apply time, refreshed with the row's own evidence."""
    extra = entry.extra
    return ticket_text(entry.ends, entry.why, entry.evidence, entry.cable, extra.get("design_cable"),
                       extra.get("expected"))
