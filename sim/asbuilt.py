"""A fabric as it is actually cabled, derived from a design plus faults, rendered as `ibnetdiscover` text.

The rendering is both a synthetic capture (tests, benchmark) and an `ibsim` net file (ibsim reads the
ibnetdiscover format; with `ibsim=True` degraded widths also carry ibsim's `w=` port option). Faults are
edits of the cabling: swap the plugs of two ports, move a plug, pull a cable, train a link lower,
remove a device, add a foreign one, give two devices one GUID.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabric.design import Design, Port
from fabric.errors import FabricError
from fabric.speeds import WIDTH_LANES
from fabric.topology import NodeType

FACTORY_SWITCH_DESCRIPTION = "Quantum Mellanox Technologies"
_DEVID = {NodeType.SWITCH: "0xd2f0", NodeType.CA: "0x101b", NodeType.ROUTER: "0x0"}


@dataclass(frozen=True, slots=True)
class BuiltNode:
    name: str
    type: NodeType
    ports: int
    description: str
    guid: int
    lid: int


@dataclass(frozen=True, slots=True)
class Cable:
    width: str
    speed: str


class AsBuilt:
    def __init__(self, nodes: dict[str, BuiltNode], plugs: dict[Port, tuple[Port, Cable]]) -> None:
        self.nodes = nodes
        self.plugs = plugs

    @classmethod
    def from_design(cls, design: Design, switch_descriptions: str = "factory", guid_base: int = 0) -> AsBuilt:
        """`switch_descriptions`: "factory" (out of the box, every switch says the same) or "location"
        (renamed: `MF0;<name>:<model>/U1`)."""
        nodes: dict[str, BuiltNode] = {}
        lid = 1
        for i, n in enumerate(design.switches()):
            desc = FACTORY_SWITCH_DESCRIPTION if switch_descriptions == "factory" else f"MF0;{n.name}:{n.model}/U1"
            nodes[n.name] = BuiltNode(n.name, n.type, n.ports, desc, 0x0C42A10300000000 + guid_base + i * 0x10, lid)
            lid += 1
        for i, n in enumerate(design.cas()):
            desc = f"{n.host} {n.hca}" if n.host else n.name
            nodes[n.name] = BuiltNode(n.name, n.type, n.ports, desc, 0xB8599F0300000000 + guid_base + i * 0x10, lid)
            lid += 1
        plugs: dict[Port, tuple[Port, Cable]] = {}
        for link in design.links:
            if link.width is None or link.speed is None:
                raise FabricError(f"{design.source}: link {link.number} ({link.a} <-> {link.b}) has no expected "
                                  "width/speed to build")
            cable = Cable(link.width, link.speed)
            plugs[link.a] = (link.b, cable)
            plugs[link.b] = (link.a, cable)
        return cls(nodes, plugs)

    # --- faults -------------------------------------------------------------------------------------
    def swap(self, p: Port, q: Port) -> None:
        """Exchange the plugs in ports p and q (two cables crossed at one end)."""
        pp, pc = self.plugs.pop(p)
        qp, qc = self.plugs.pop(q)
        del self.plugs[pp], self.plugs[qp]
        self._connect(p, qp, qc)
        self._connect(q, pp, pc)

    def move(self, p: Port, to: Port) -> None:
        """The cable that belongs in p is plugged into `to` (which must be free)."""
        peer, cable = self.plugs.pop(p)
        del self.plugs[peer]
        if to in self.plugs:
            raise ValueError(f"{to} is not free")
        self._connect(to, peer, cable)

    def unplug(self, p: Port) -> None:
        peer, _ = self.plugs.pop(p)
        del self.plugs[peer]

    def plug(self, p: Port, q: Port, width: str = "4X", speed: str = "HDR") -> None:
        self._connect(p, q, Cable(width, speed))

    def degrade(self, p: Port, width: str | None = None, speed: str | None = None) -> None:
        peer, cable = self.plugs[p]
        new = replace(cable, width=width or cable.width, speed=speed or cable.speed)
        self.plugs[p] = (peer, new)
        self.plugs[peer] = (p, new)

    def remove_node(self, name: str) -> None:
        for port in [p for p in self.plugs if p.node == name]:
            if port in self.plugs:
                self.unplug(port)
        del self.nodes[name]

    def add_node(self, name: str, type_: NodeType, ports: int, description: str, guid: int) -> None:
        lid = max((n.lid for n in self.nodes.values()), default=0) + 1
        self.nodes[name] = BuiltNode(name, type_, ports, description, guid, lid)

    def set_guid(self, name: str, guid: int) -> None:
        self.nodes[name] = replace(self.nodes[name], guid=guid)

    def guid_of(self, name: str) -> str:
        return f"{self.nodes[name].guid:016x}"

    def sim_id(self, name: str) -> str:
        """The node id ibsim knows a node by (the quoted id of its net-file record)."""
        n = self.nodes[name]
        return f"{'S' if n.type is NodeType.SWITCH else 'H'}-{n.guid:016x}"

    def _connect(self, a: Port, b: Port, cable: Cable) -> None:
        self.plugs[a] = (b, cable)
        self.plugs[b] = (a, cable)

    # --- rendering ----------------------------------------------------------------------------------
    def reachable(self, start: str) -> set[str]:
        seen = {start}
        todo = [start]
        by_node: dict[str, list[Port]] = {}
        for p in self.plugs:
            by_node.setdefault(p.node, []).append(p)
        while todo:
            for p in by_node.get(todo.pop(), []):
                peer = self.plugs[p][0].node
                if peer not in seen:
                    seen.add(peer)
                    todo.append(peer)
        return seen

    def capture(self, start: str) -> str:
        """What `ibnetdiscover` run from node `start` prints: only the part of the fabric it can reach."""
        return self.render(only=self.reachable(start))

    def render(self, ibsim: bool = False, only: set[str] | None = None) -> str:
        """The whole cabling as ibnetdiscover text (an ibsim net file when `ibsim`)."""
        out: list[str] = ["#", "# Topology file: generated by sim.asbuilt", "#", ""]
        by_node: dict[str, list[Port]] = {}
        for p in self.plugs:
            by_node.setdefault(p.node, []).append(p)
        order = sorted(self.nodes.values(), key=lambda n: (n.type is not NodeType.SWITCH, n.lid))
        for n in order:
            if only is not None and n.name not in only:
                continue
            g = f"{n.guid:016x}"
            out += ["vendid=0x2c9", f"devid={_DEVID[n.type]}", f"sysimgguid=0x{g}"]
            if n.type is NodeType.SWITCH:
                out.append(f"switchguid=0x{g}({n.guid:x})")
                out.append(f'Switch\t{n.ports} "S-{g}"\t\t# "{n.description}" enhanced port 0 lid {n.lid} lmc 0')
            else:
                out.append(f"caguid=0x{g}")
                out.append(f'Ca\t{n.ports} "H-{g}"\t\t# "{n.description}"')
            for p in sorted(by_node.get(n.name, []), key=lambda x: x.port):
                peer, cable = self.plugs[p]
                pn = self.nodes[peer.node]
                pg = f"{pn.guid:016x}"
                rate = f"{WIDTH_LANES[cable.width]}x{cable.speed}"
                opt = f" w={WIDTH_LANES[cable.width]}" if ibsim and cable.width != "4X" else ""
                if n.type is NodeType.SWITCH:
                    prefix = "S" if pn.type is NodeType.SWITCH else "H"
                    ppg = "" if pn.type is NodeType.SWITCH else f"({pn.guid + peer.port:x}) "
                    out.append(f'[{p.port}]\t"{prefix}-{pg}"[{peer.port}]{ppg}{opt}\t\t# "{pn.description}" '
                               f"lid {pn.lid} {rate}")
                else:
                    out.append(f'[{p.port}]({n.guid + p.port:x}) \t"S-{pg}"[{peer.port}]{opt}\t\t# lid {n.lid} '
                               f'lmc 0 "{pn.description}" lid {pn.lid} {rate}')
            out.append("")
        return "\n".join(out) + "\n"


def render_iblinkinfo(ab: AsBuilt, only: set[str] | None = None) -> str:
    """`iblinkinfo` (default form) for the cabling: unplugged ports show `Down/ Polling`."""
    out: list[str] = []
    for n in sorted(ab.nodes.values(), key=lambda x: (x.type is NodeType.SWITCH, x.lid)):
        if only is not None and n.name not in only:
            continue
        if n.type is NodeType.SWITCH:
            out.append(f"Switch: 0x{n.guid:016x} {n.description}:")
        else:
            out.append(f"CA: {n.description}:")
        for port in range(1, n.ports + 1):
            lead = f"      0x{n.guid + port:016x} {n.lid:6d} {port:4d}" if n.type is not NodeType.SWITCH else (
                f"          {n.lid:6d} {port:4d}")
            plug = ab.plugs.get(Port(n.name, port))
            if plug is None:
                out.append(f'{lead}[  ] ==(                Down/ Polling)==>             [  ] "" ( )')
                continue
            peer, cable = plug
            pn = ab.nodes[peer.node]
            from fabric.speeds import SPEED_GBPS

            rate = f"{cable.width:>3}   {SPEED_GBPS[cable.speed]:>11g} Gbps Active/  LinkUp"
            out.append(f'{lead}[  ] ==( {rate})==> {pn.lid:6d} {peer.port:4d}[  ] "{pn.description}" ( )')
    return "\n".join(out) + "\n"
