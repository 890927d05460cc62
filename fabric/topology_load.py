"""The fabric as built for Slurm's topology.conf: a request (captures or live, the site, the design, the
state store whose port ledger and burn-in take links out) read into a `SlurmTopology`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fabric.design import load_design
from fabric.errors import FabricError
from fabric.identify import identify
from fabric.slurm_topology import SlurmTopology, build
from fabric.topology import NodeType
from fabric.topology_inputs import Hca, LinkKey, design_hcas, host_map, read_exclusions
from provision.site.store import open_store, open_store_at


@dataclass(frozen=True)
class TopologyRequest:
    """What `fabric topology` reads: the fabric (capture files or live discovery, as `fabric validate` reads
    it), the site (host names, design, state store) or a design alone, and a host glob."""

    site: Path | None = None
    design: Path | None = None
    discovered: tuple[Path, ...] = ()
    live: bool = False
    timeout: float = 60.0
    ib_diags: Path | None = None
    fmt: str = "auto"
    ufm_systems: Path | None = None
    db: Path | None = None
    hosts: str | None = None


def load_slurm_topology(req: TopologyRequest, warn: Callable[[str], None]) -> SlurmTopology:
    """The tree to tell Slurm, from the fabric as built, without the links the ledger or burn-in took out."""
    from fabric.pipeline import Inputs, live_topology, load_captures
    from provision.site import load_site
    from provision.site.model import Role

    if bool(req.discovered) == req.live:
        raise FabricError("give either --discovered FILE (repeatable) or --live")
    site = load_site(req.site) if req.site is not None else None
    if req.live:
        inputs = Inputs(site=req.site, live=True, timeout=req.timeout, ib_diags=req.ib_diags)
        top = live_topology(inputs, warn)
    else:
        top = load_captures(list(req.discovered), req.fmt, req.ufm_systems)
    design_path = req.design or (site.fabric_design if site is not None else None)
    names: dict[str, str] = {}
    hcas: dict[str, Hca] = {}
    if design_path is not None:
        design = load_design(design_path)
        ident = identify(design, top)
        names = {g: p.name for g, p in ident.by_guid.items() if top.nodes[g].type is NodeType.SWITCH}
        hcas = design_hcas(design, ident)
    wanted = None if site is None else {h.hostname.split(".")[0].lower(): h.hostname for h in site.hosts()
                                        if h.role is Role.gpu}
    env_db = os.environ.get("BRINGUP_STATE_DB")
    db = site.paths.state_db(req.db) if site is not None else req.db or (Path(env_db) if env_db else None)
    excluded: dict[LinkKey, str] = {}
    if db is None:
        warn("no --site, --db or $BRINGUP_STATE_DB: no link is left out for the port ledger or the burn-in")
    elif not db.is_file():
        warn(f"no state database at {db}: no link is left out for the port ledger or the burn-in")
    else:
        with open_store(site, req.db) if site is not None else open_store_at(db) as store:
            excluded = read_exclusions(store)
    return build(top, host_map(top, hcas, wanted, req.hosts), excluded, names)
