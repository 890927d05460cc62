"""Fat-tree cabling designs from a few parameters (2-tier, and 3-tier rail-optimised).

Naming and placement rules (what a site file must match):

* Hosts are numbered 1..`hosts` and fill compute racks `first_rack`, `first_rack`+1, ... with
  `hosts_per_rack` each; a host's name is `host_name.format(rack=, slot=, index=, row=)`, e.g.
  `gpu-{rack:02d}-{slot:02d}` -> `gpu-03-05` (the Imbue-scale example uses 8 hosts per rack, so 64 racks,
  and its last slot `gpu-64-08` stays empty) or `gpu-r{rack}-{slot:02d}` -> `gpu-r1-05` (the sim site).
  A host's U position is `first_u + (slot - 1) * host_height_u`; rows and racks are written with
  `row_name`/`rack_name` (format strings over `row`/`rack` numbers, e.g. `A` and `r{rack}`).
* HCA `mlx5_<i>` of every host is on rail `i % rails`. A leaf serves one rail for a group of
  `radix/2 // ceil(hcas/rails)` consecutive hosts; its first `radix/2` ports go down, the rest go up.
* 2 tiers: `spines` spines (default: just enough ports for every leaf uplink); a leaf's j-th uplink goes to
  spine `j % spines`, on that spine's next free port.
* 3 tiers: every rail is a pod with one spine per leaf of that rail; a leaf's j-th uplink goes to pod spine
  `j % spines_per_pod`. Spine s of every pod is in core plane s, which has `ceil(rails * radix/2 / radix)`
  cores; a spine's k-th uplink goes to core `k % cores_per_plane` of its plane.
* Service hosts (a controller, UFM) get one HCA `mlx5_0` each, on the first free down port of the rail-0,
  1, ... leaves of the first group.
* Switches sit in network racks numbered after the last compute rack, `switches_per_rack` per rack from
  U40 downwards in 2U steps, leaves first, then spines, then cores; rows hold `racks_per_row` racks.
  A switch is named `<tier>-<row>-<rack:02d>-U<u:02d>` (tier: leaf, spine, core), e.g. `leaf-1-03-U40`.
* Cables are numbered `C00001`... in link order (host links, then leaf-spine, then spine-core).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabric.design import Design, DesignLink, DesignNode, Location, Port, build_design
from fabric.errors import GeneratorError
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import NodeType

TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}


@dataclass(frozen=True)
class FatTreeParams:
    hosts: int
    hcas_per_host: int = 8
    radix: int = 40
    tiers: int = 2
    rails: int | None = None
    hosts_per_rack: int = 8
    host_name: str = "gpu-{rack:02d}-{slot:02d}"
    service_hosts: tuple[str, ...] = ()
    spines: int | None = None
    speed: str = "HDR"
    width: str = "4X"
    switch_model: str = "QM8700"
    name: str = "fabric"
    first_rack: int = 1
    racks_per_row: int = 16
    switches_per_rack: int = 16
    host_height_u: int = 4
    first_u: int = 1
    row_name: str = "{row}"
    rack_name: str = "{rack:02d}"

    def location(self, rack: int, u: int | None) -> Location:
        row = (rack - 1) // self.racks_per_row + 1
        return Location(self.row_name.format(row=row), self.rack_name.format(rack=rack), u)


class _Placer:
    def __init__(self, p: FatTreeParams, first_network_rack: int) -> None:
        self.p = p
        self.rack = first_network_rack
        self.count = 0

    def next(self) -> Location:
        slot = self.count % self.p.switches_per_rack
        rack = self.rack + self.count // self.p.switches_per_rack
        self.count += 1
        return self.p.location(rack, 40 - 2 * slot)


class _Cabling:
    """The nodes and numbered links of a design being generated, with each switch's next free port."""

    def __init__(self, p: FatTreeParams, width: str, speed: str, placer: _Placer) -> None:
        self.p = p
        self.width = width
        self.speed = speed
        self.placer = placer
        self.nodes: list[DesignNode] = []
        self.links: list[DesignLink] = []
        self.used: dict[str, int] = {}

    def link(self, a: str, ap: int, b: str, bp: int) -> None:
        n = len(self.links) + 1
        self.links.append(DesignLink(Port(a, ap), Port(b, bp), self.width, self.speed, f"C{n:05d}", number=n))

    def next_port(self, sw: str, limit: int) -> int:
        self.used[sw] = self.used.get(sw, 0) + 1
        if self.used[sw] > limit:
            raise GeneratorError(f"{sw} runs out of ports ({limit}): use a larger radix or fewer hosts")
        return self.used[sw]

    def switch(self, tier: int) -> str:
        loc = self.placer.next()
        name = f"{TIER_NAMES[tier]}-{loc.row}-{loc.rack}-U{loc.u:02d}"
        self.nodes.append(DesignNode(name=name, type=NodeType.SWITCH, ports=self.p.radix, tier=tier,
                                     model=self.p.switch_model, location=loc))
        return name

    def uplink(self, lower: str, upper: str) -> None:
        self.link(lower, self.next_port(lower, self.p.radix), upper, self.next_port(upper, self.p.radix))


def generate_fat_tree(p: FatTreeParams) -> Design:
    rails = p.rails or p.hcas_per_host
    if p.tiers not in (2, 3):
        raise GeneratorError(f"tiers must be 2 or 3, not {p.tiers}")
    if p.hosts < 1 or p.hcas_per_host < 1 or rails < 1 or p.radix < 4 or p.radix % 2:
        raise GeneratorError("hosts, hcas and rails must be >= 1 and the radix an even number >= 4")
    speed, width = normalise_speed(p.speed), normalise_width(p.width)
    if speed is None or width is None:
        raise GeneratorError(f"unknown speed/width {p.speed!r}/{p.width!r}")
    down = p.radix // 2
    hca_per_leaf = math.ceil(p.hcas_per_host / rails)
    hosts_per_leaf = down // hca_per_leaf
    if hosts_per_leaf < 1:
        raise GeneratorError(f"a leaf with {down} down ports cannot take {hca_per_leaf} HCAs of one host")
    groups = math.ceil(p.hosts / hosts_per_leaf)
    last_compute_rack = p.first_rack + (p.hosts - 1) // p.hosts_per_rack
    cabling = _Cabling(p, width, speed, _Placer(p, last_compute_rack + 1))
    leaves = [[cabling.switch(1) for _ in range(rails)] for _ in range(groups)]
    _host_links(cabling, leaves, rails, hosts_per_leaf, hca_per_leaf, last_compute_rack)
    up = p.radix - down
    flat_leaves = [leaf for group in leaves for leaf in group]
    for leaf in flat_leaves:
        cabling.used[leaf] = down
    if p.tiers == 2:
        nspines = p.spines or math.ceil(len(flat_leaves) * up / p.radix)
        spines = [cabling.switch(2) for _ in range(nspines)]
        for leaf in flat_leaves:
            for j in range(up):
                cabling.uplink(leaf, spines[j % nspines])
    else:
        _three_tier_uplinks(cabling, leaves, rails, up)
    return build_design(p.name, width, speed, cabling.nodes, cabling.links, source=f"generated:{p.name}")


def _host_links(cabling: _Cabling, leaves: list[list[str]], rails: int, hosts_per_leaf: int, hca_per_leaf: int,
                last_compute_rack: int) -> None:
    """Every host's HCAs to the leaves of its group (HCA i on rail i % rails), then the service hosts."""
    p = cabling.p
    leaf_down_used: dict[str, set[int]] = {}
    for h in range(p.hosts):
        rack = p.first_rack + h // p.hosts_per_rack
        slot = h % p.hosts_per_rack + 1
        row = (rack - 1) // p.racks_per_row + 1
        host = p.host_name.format(rack=rack, slot=slot, index=h + 1, row=row)
        loc = p.location(rack, p.first_u + (slot - 1) * p.host_height_u)
        g = h // hosts_per_leaf
        for i in range(p.hcas_per_host):
            hca = f"mlx5_{i}"
            cabling.nodes.append(DesignNode(name=f"{host}/{hca}", type=NodeType.CA, ports=1, location=loc,
                                            host=host, hca=hca))
            leaf = leaves[g][i % rails]
            port = (h % hosts_per_leaf) * hca_per_leaf + i // rails + 1
            leaf_down_used.setdefault(leaf, set()).add(port)
            cabling.link(leaf, port, f"{host}/{hca}", 1)
    for k, svc in enumerate(p.service_hosts):
        leaf = leaves[0][k % rails]
        taken = leaf_down_used.setdefault(leaf, set())
        free = next((q for q in range(1, p.radix // 2 + 1) if q not in taken), None)
        if free is None:
            raise GeneratorError(f"no free down port on {leaf} for service host {svc}")
        taken.add(free)
        cabling.nodes.append(DesignNode(name=f"{svc}/mlx5_0", type=NodeType.CA, ports=1, host=svc, hca="mlx5_0",
                                        location=placer_location(p, last_compute_rack)))
        cabling.link(leaf, free, f"{svc}/mlx5_0", 1)


def _three_tier_uplinks(cabling: _Cabling, leaves: list[list[str]], rails: int, up: int) -> None:
    """One pod of spines per rail (one spine per leaf of the rail); spine s of every pod in core plane s."""
    p = cabling.p
    groups = per_pod = len(leaves)
    if per_pod > up:
        raise GeneratorError(f"{per_pod} leaves per rail need more than the {up} uplinks of a leaf")
    pods = [[cabling.switch(2) for _ in range(per_pod)] for _ in range(rails)]
    cores_per_plane = math.ceil(rails * up / p.radix)
    planes = [[cabling.switch(3) for _ in range(cores_per_plane)] for _ in range(per_pod)]
    for r in range(rails):
        for g in range(groups):
            leaf = leaves[g][r]
            for j in range(up):
                cabling.uplink(leaf, pods[r][j % per_pod])
    for r in range(rails):
        for s, sp in enumerate(pods[r]):
            for k in range(p.radix - cabling.used.get(sp, 0)):
                cabling.uplink(sp, planes[s][k % cores_per_plane])


def placer_location(p: FatTreeParams, last_compute_rack: int) -> Location:
    """Service hosts sit in the first network rack, at the bottom."""
    return p.location(last_compute_rack + 1, 2)


def describe(p: FatTreeParams) -> str:
    """The command line that regenerates a design (for the file's header comment)."""
    args = [f"--hosts {p.hosts}", f"--hcas {p.hcas_per_host}", f"--radix {p.radix}", f"--tiers {p.tiers}"]
    if p.rails:
        args.append(f"--rails {p.rails}")
    args += [f"--hosts-per-rack {p.hosts_per_rack}", f"--host-name '{p.host_name}'"]
    args += [f"--service-host {s}" for s in p.service_hosts]
    if p.spines:
        args.append(f"--spines {p.spines}")
    args += [f"--speed {p.speed}", f"--model {p.switch_model}", f"--name {p.name}"]
    if p.row_name != "{row}" or p.rack_name != "{rack:02d}":
        args += [f"--row-name '{p.row_name}'", f"--rack-name '{p.rack_name}'"]
    if p.first_u != 1 or p.host_height_u != 4:
        args += [f"--first-u {p.first_u}", f"--host-height-u {p.host_height_u}"]
    return "fabric design generate " + " ".join(args)
