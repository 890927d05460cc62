"""Paths of the port-health fixtures and of the real captures that may not be checked out; the ibsim capture's
fabric and plans made from UFM event lines over it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.plan import PortPlan, plan_ports
from fabric.topology import Link, NodeType, Topology
from fabric.ufm.events import iter_event_log
from provision.site.port_policy import PortPolicy

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "fabric" / "ports"
IBSIM = FIXTURES / "ibsim"
REALDATA = REPO / ".." / "shared" / "realdata"
LEAF = "0c42a10300000000"  # leaf-A-r3-U40 in the ibsim captures
SPINE = "0c42a10300000080"


def realdata(relative: str) -> str:
    path = REALDATA / relative
    if not path.is_file():
        pytest.skip(f"real capture {relative} not present (../shared/realdata is not checked out here; its "
                    "licence keeps it out of the repository)")
    return path.read_text()


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def ibsim_topology() -> Topology:
    return parse_ibnetdiscover((IBSIM / "ibnetdiscover.txt").read_text())


def uplinks(top: Topology, n: int) -> list[Link]:
    """`n` switch-to-switch links, each from a different switch (so no switch's uplink share is capped)."""
    out: list[Link] = []
    used: set[str] = set()
    for link in top.links:
        if all(top.nodes[e.guid].type is NodeType.SWITCH for e in (link.a, link.b)) and \
                not {link.a.guid, link.b.guid} & used:
            out.append(link)
            used |= {link.a.guid, link.b.guid}
    return out[:n]


def down_line(link: Link, ms: int = 0, second: str = "11:00:00") -> str:
    return (f"2026-12-01 {second}.{ms:03d} [{ms}] [329] WARNING [Fabric_Topology] Link [Source "
            f"{link.a.guid}_{link.a.port}  TO Dest: {link.b.guid}_{link.b.port}]: Link went down")


def plan_from_lines(lines: list[str], policy: PortPolicy | None = None) -> PortPlan:
    return plan_ports(ibsim_topology(), iter_event_log(lines, "event.log"), [], [], policy or PortPolicy(), NOW)
