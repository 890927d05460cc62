"""The fabric as built for Slurm's topology.conf: a request (captures or live, the site, the design, the
state store whose port ledger and burn-in take links out) read into a `SlurmTopology`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fabric.design import load_design
from fabric.errors import FabricError
from fabric.identify import identify
from fabric.slurm_topology import SlurmTopology, build
from fabric.topology import NodeType
from fabric.topology_inputs import Hca, LinkKey, design_hcas, host_map, read_exclusions
from provision.site.store import open_store, open_store_at

if TYPE_CHECKING:
    from fabric.pipeline import Inputs


@dataclass(frozen=True)
class TopologyRequest:
    """What `fabric topology` reads: the fabric and the site or design as `fabric validate` reads them (the
    site gives host names, the design and the state store; a baseline is not a design here), a state store
    named without a site, and a host glob."""

    fabric: Inputs
    db: Path | None = None
    hosts: str | None = None


def load_slurm_topology(req: TopologyRequest, warn: Callable[[str], None]) -> SlurmTopology:
    """The tree to tell Slurm, from the fabric as built, without the links the ledger or burn-in took out."""
    from fabric.pipeline import live_topology, load_captures
    from provision.site import load_site
    from provision.site.model import Role

    given = req.fabric
    if bool(given.discovered) == given.live:
        raise FabricError("give either --discovered FILE (repeatable) or --live")
    site = load_site(given.site) if given.site is not None else None
    if given.live:
        top = live_topology(given, warn)
    else:
        top = load_captures(list(given.discovered), given.fmt, given.ufm_systems)
    design_path = given.design or (site.fabric_design if site is not None else None)
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
