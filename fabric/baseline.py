"""A known-good capture as a design: compare today's fabric with it (`fabric validate --baseline`).

Every node keeps its GUID (so identification is by GUID first, then by description for a replaced HCA),
switches are named by their description (`MF0;<name>:...` -> `<name>`) and HCAs `<host>/<hca>`, made unique
with the GUID where two nodes share a description. Tiers are hop counts from the HCAs; each link expects
the width and speed it had in the baseline, and one the baseline capture does not give stays unknown (None):
such a link is `rate_unknown`, never checked against an assumed rate.
"""

from __future__ import annotations

from collections import Counter

from fabric.design import Design, DesignLink, DesignNode, Port, build_design
from fabric.identify import ca_name_from_description, switch_name_from_description
from fabric.topology import NodeType, Topology


def design_from_topology(top: Topology, name: str) -> Design:
    nodes = {g: n for g, n in top.nodes.items() if not n.is_aggregation_node}
    raw: dict[str, str] = {}
    for guid, node in nodes.items():
        if node.type is NodeType.SWITCH:
            raw[guid] = switch_name_from_description(node.description) or f"switch-{guid}"
        else:
            raw[guid] = ca_name_from_description(node.description) or (node.description or f"ca-{guid}")
    counts = Counter(raw.values())
    names = {g: (n if counts[n] == 1 else f"{n}@{g}") for g, n in raw.items()}

    max_port: dict[str, int] = {}
    adjacency: dict[str, set[str]] = {}
    for link in top.links:
        for e, o in ((link.a, link.b), (link.b, link.a)):
            max_port[e.guid] = max(max_port.get(e.guid, 0), e.port)
            adjacency.setdefault(e.guid, set()).add(o.guid)
    tiers = {g: 0 for g, n in nodes.items() if n.type is not NodeType.SWITCH}
    frontier = list(tiers)
    while frontier:
        nxt = []
        for g in frontier:
            for peer in adjacency.get(g, ()):
                if peer in nodes and peer not in tiers:
                    tiers[peer] = tiers[g] + 1
                    nxt.append(peer)
        frontier = nxt

    dnodes = []
    for guid, node in nodes.items():
        ports = max(node.nports or 0, max_port.get(guid, 0), 1)
        host = hca = None
        if node.type is not NodeType.SWITCH and "/" in names[guid]:
            host, hca = names[guid].split("/", 1)
        dnodes.append(DesignNode(name=names[guid], type=node.type, ports=ports,
                                 tier=tiers.get(guid, 1) if node.type is NodeType.SWITCH else 0,
                                 guid=guid, host=host, hca=hca))
    links: list[DesignLink] = []
    for link in top.links:
        if link.a.guid not in nodes or link.b.guid not in nodes:
            continue
        links.append(DesignLink(Port(names[link.a.guid], link.a.port), Port(names[link.b.guid], link.b.port),
                                link.width, link.speed, None, number=len(links) + 1))
    # No defaults: every link expects the rate it had, and a rate the capture did not give stays None (the
    # validator reports such a link `rate_unknown`), never the fabric's usual rate nor an assumed 4X HDR.
    return build_design(name, None, None, dnodes, links, source=name)
