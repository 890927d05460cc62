"""The context the checks of one `validate` run share: both sides, the links accounted for so far, and how a
designed port or a discovered end is written in a finding."""

from __future__ import annotations

from fabric.design import Design, DesignLink, Port
from fabric.findings import FEnd, Finding
from fabric.identify import Identification
from fabric.topology import End, Link, Topology


class CheckContext:
    """What every check of one validation reads (design, topology, identification) and shares: the findings
    so far and the designed and discovered links already accounted for."""

    def __init__(self, design: Design, top: Topology, ident: Identification) -> None:
        self.design = design
        self.top = top
        self.ident = ident
        self.guid_of = ident.by_name
        self.findings: list[Finding] = []
        self.used_design: set[int] = set()
        self.used_disc: set[tuple[End, End]] = set()
        self.down = {d.end: d for d in top.down_ports}
        self.tier_names = design.tier_names()
        self.claimed_by = {end: conflict.guid for conflict in top.conflicts for end in conflict.claimants}
        self.hidden: dict[str, list[str]] = {}
        self._tier_cache: dict[int, str] = {}

    # ends -------------------------------------------------------------------------------------------
    def dend(self, p: Port) -> FEnd:
        node = self.design.nodes[p.node]
        guid = self.guid_of.get(p.node)
        desc = self.top.nodes[guid].description if guid and guid in self.top.nodes else None
        return FEnd(guid, p.node, p.port, node.location, desc)

    def tend(self, e: End) -> FEnd:
        name = self.ident.name(e.guid)
        node = self.top.nodes.get(e.guid)
        loc = self.design.nodes[name].location if name else None
        return FEnd(e.guid, name, e.port, loc, node.description if node else None)

    def to_design(self, e: End) -> Port | None:
        name = self.ident.name(e.guid)
        return Port(name, e.port) if name else None

    def disc_at(self, p: Port) -> Link | None:
        guid = self.guid_of.get(p.node)
        return None if guid is None else self.top.by_end.get(End(guid, p.port))

    def tier(self, dl: DesignLink) -> str:
        t = self._tier_cache.get(dl.number)
        if t is None:
            t = self._tier_cache[dl.number] = self.tier_names.get(self.design.link_tier(dl), "?")
        return t

    @staticmethod
    def key(link: Link) -> tuple[End, End]:
        return (link.a, link.b)

    def add(self, f: Finding) -> None:
        self.findings.append(f)
