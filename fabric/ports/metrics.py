"""The port-health stage's Prometheus textfile: every link the plan acts on or watches, with why.

`bringup_ports.prom` in the metrics directory (`provision.metrics.textfile`), rewritten by every
`fabric ports apply` (dry run or not): per link its action (disable, watch, already_disabled) and the
cause its evidence shows. Causes, from UFM's event codes (../shared/REFERENCE.md, Imbue's list) and the
other evidence kinds: `flapping` (702 "unhealthy due to FLAPPING", or two or more 329 link went down / 112
link downed), `errors` (110/113/115/116 threshold events, 917/918 symbol BER, 702 for another reason, a
counter rising above its threshold), `degraded` (trained below its rate, or slow in burn-in), `down` (one
link-down event, or a port that should be up: a link the plan disabled goes down once by its own doing).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from fabric.ports.evidence import Evidence
from fabric.ports.plan import PlannedLink, PortPlan
from provision.metrics.textfile import Family, gauge, metrics_dir, write_families

PORTS_FILE = "bringup_ports.prom"
UNHEALTHY_CODE = 702  # "considered by SM as unhealthy due to FLAPPING" (or another reason it names)
LINK_DOWN_CODES = frozenset({112, 329})
ERROR_CODES = frozenset({110, 113, 115, 116, 917, 918})
log = logging.getLogger(__name__)
_BY_KIND = {"counter": "errors", "degraded": "degraded", "port_down": "down", "disabled": "down"}


def causes(evidence: Sequence[Evidence]) -> list[str]:
    """What a link's evidence shows: flapping, errors, degraded, down (or other)."""
    found: set[str] = set()
    downs = 0
    for e in evidence:
        if e.kind == "event" and e.code is not None:
            if e.code == UNHEALTHY_CODE:
                found.add("flapping" if "FLAPPING" in e.text.upper() else "errors")
            downs += e.code in LINK_DOWN_CODES
            if e.code in ERROR_CODES:
                found.add("errors")
        elif e.kind in _BY_KIND:
            found.add(_BY_KIND[e.kind])
    if downs:
        found.add("flapping" if downs >= 2 else "down")
    return sorted(found) or ["other"]


def _hosts(link: PlannedLink) -> str:
    return ",".join(sorted({e.name.split("/")[0] for e in link.ends() if not e.is_switch}))


def link_rows(plan: PortPlan) -> Iterable[tuple[dict[str, str], float]]:
    for link in (*plan.disable, *plan.watch, *plan.already_disabled):
        name = " -- ".join(f"{e.name}[{e.port}]" for e in link.ends())
        for c in causes(link.evidence):
            yield {"link": name, "host": _hosts(link), "action": link.action, "cause": c}, 1


def port_families(plan: PortPlan) -> list[Family]:
    return [
        gauge("bringup_ib_link_planned", "1 for each link the port plan acts on or watches, by action and cause.",
              link_rows(plan)),
        gauge("bringup_ib_links_planned", "Links of the last port plan by action.",
              (({"action": a}, n) for a, n in (("disable", len(plan.disable)), ("watch", len(plan.watch)),
                                               ("already_disabled", len(plan.already_disabled))))),
        gauge("bringup_ports_plan_timestamp_seconds", "When the last port plan was made (Unix time).",
              [({}, plan.now.timestamp())]),
    ]


def write_port_metrics(plan: PortPlan, state_db: Path) -> Path | None:
    """`bringup_ports.prom`; a metrics directory that cannot be written is logged, never fails the command."""
    directory = metrics_dir(state_db)
    try:
        return write_families(directory, PORTS_FILE, port_families(plan))
    except OSError as exc:
        log.warning("port metrics not written to %s: %s", directory, exc)
        return None
