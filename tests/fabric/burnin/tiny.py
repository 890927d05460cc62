"""Hand-made fabrics small enough to know their optimum: `ibnetdiscover` text and `dump_lfts` text.

`tiny(switches, hcas, cables, route)`: switches by name, HCAs as "host hca" on a leaf port, cables between
switch ports; `route(switch, lid_owner)` picks the out-port when shortest paths tie (minhop-like), so a
test can steer which links carry which LIDs. Formats as `sim.asbuilt` and the real `dump_lfts` print
them (tests/fixtures/fabric/burnin/sim-site.* are real ones).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fabric.burnin.lft import parse_lfts
from fabric.burnin.routes import Routing, build_routing
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover

Cable = tuple[str, int, str, int]  # switch, port, switch, port


def tiny(switches: Sequence[str], hcas: Sequence[tuple[str, str, int]], cables: Sequence[Cable],
         pick: Callable[[str, int, list[int]], int] | None = None) -> tuple[str, str]:
    """(ibnetdiscover, dump_lfts). `hcas`: ("host hca", leaf, leaf port). `pick(switch, lid, ports)` chooses
    among the out-ports on shortest paths (default: by LID, round robin)."""
    sguid = {s: 0x0C42A10300000000 + 0x10 * i for i, s in enumerate(switches)}
    hguid = {h: 0xB8599F0300000000 + 0x10 * i for i, (h, _l, _p) in enumerate(hcas)}
    lid = {s: i + 1 for i, s in enumerate(switches)}
    lid.update({h: len(switches) + i + 1 for i, (h, _l, _p) in enumerate(hcas)})
    ports: dict[str, dict[int, tuple[str, int]]] = {s: {} for s in switches}
    for a, pa, b, pb in cables:
        ports[a][pa] = (b, pb)
        ports[b][pb] = (a, pa)
    for h, leaf, p in hcas:
        ports[leaf][p] = (h, 1)
    desc = {s: f"MF0;{s}:MQM8700/U1" for s in switches}
    out = ["#", "# Topology file: hand-made", "#", ""]
    for s in switches:
        g = f"{sguid[s]:016x}"
        out += ["vendid=0x2c9", "devid=0xd2f0", f"sysimgguid=0x{g}", f"switchguid=0x{g}({sguid[s]:x})",
                f'Switch\t40 "S-{g}"\t\t# "{desc[s]}" enhanced port 0 lid {lid[s]} lmc 0']
        for p, (peer, pp) in sorted(ports[s].items()):
            if peer in sguid:
                out.append(f'[{p}]\t"S-{sguid[peer]:016x}"[{pp}]\t\t# "{desc[peer]}" lid {lid[peer]} 4xHDR')
            else:
                out.append(f'[{p}]\t"H-{hguid[peer]:016x}"[1]({hguid[peer] + 1:x}) \t\t# "{peer}" lid {lid[peer]} 4xHDR')
        out.append("")
    for h, leaf, p in hcas:
        g = f"{hguid[h]:016x}"
        out += ["vendid=0x2c9", "devid=0x101b", f"sysimgguid=0x{g}", f"caguid=0x{g}", f'Ca\t1 "H-{g}"\t\t# "{h}"',
                f'[1]({hguid[h] + 1:x}) \t"S-{sguid[leaf]:016x}"[{p}]\t\t# lid {lid[h]} lmc 0 "{desc[leaf]}" '
                f"lid {lid[leaf]} 4xHDR", ""]
    return "\n".join(out) + "\n", _lfts(switches, hcas, ports, lid, sguid, hguid, desc, pick)


def _lfts(switches: Sequence[str], hcas: Sequence[tuple[str, str, int]], ports: dict[str, dict[int, tuple[str, int]]],
          lid: dict[str, int], sguid: dict[str, int], hguid: dict[str, int], desc: dict[str, str],
          pick: Callable[[str, int, list[int]], int] | None) -> str:
    top = max(lid.values())
    # hop distance from every switch to every leaf with an HCA (BFS over switch cables)
    dist: dict[str, dict[str, int]] = {}
    for target in switches:
        d, frontier = {target: 0}, [target]
        while frontier:
            nxt = []
            for s in frontier:
                for peer, _pp in ports[s].values():
                    if peer in sguid and peer not in d:
                        d[peer] = d[s] + 1
                        nxt.append(peer)
            frontier = nxt
        dist[target] = d
    out = []
    for s in switches:
        out += [f"Unicast lids [0x0-0x{top:x}] of switch Lid {lid[s]} guid 0x{sguid[s]:016x} ({desc[s]}):",
                "  Lid  Out   Destination", "       Port     Info "]
        rows = []
        for name, owner_lid in sorted(lid.items(), key=lambda kv: kv[1]):
            if name in sguid:
                target, port_guid, kind = name, sguid[name], "Switch"
                shown = desc[name]
            else:
                target = next(leaf for h, leaf, _p in hcas if h == name)
                port_guid, kind, shown = hguid[name] + 1, "Channel Adapter", name
            if s == name:
                port = 0
            elif s == target and name not in sguid:
                port = next(p for p, (peer, _pp) in ports[s].items() if peer == name)
            else:
                best = dist[target].get(s)
                if best is None:
                    continue
                choices = sorted(p for p, (peer, _pp) in ports[s].items()
                                 if peer in sguid and dist[target].get(peer) == best - 1)
                port = pick(s, owner_lid, choices) if pick else choices[owner_lid % len(choices)]
            rows.append(f"0x{owner_lid:04x} {port:03d} : ({kind} portguid 0x{port_guid:016x}: '{shown}')")
        out += [*rows, f"{len(rows)} valid lids dumped "]
    return "\n".join(out) + "\n"


def tiny_routing(*args: object, hosts: set[str] | None = None, **kw: object) -> Routing:
    disc, lfts = tiny(*args, **kw)  # type: ignore[arg-type]
    return build_routing(parse_ibnetdiscover(disc), parse_lfts(lfts), hosts)
