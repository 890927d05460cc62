"""`fabric burnin plan --site S`: the site's GPU hosts' HCAs, on the fabric as it is now.

The topology is discovered live (or read from `--discovered`), the forwarding tables are read from the
switches (`--routing live`: `dump_lfts` as the site's tools reach the fabric, `fabric.diags`) or from a file.
Hosts with an HCA port that is down or disabled (what `fabric ports` disabled shows as `Down/Disabled`)
are left out with that reason, so no flow is planned over a port that cannot carry it. The plan's JSON
carries what the runner and the judge need besides the stages: each switch's LID (for `perfquery`), the
design's line rate per direction and the site's floor, and both ends of every link with their locations.

The routing engine that programmed the tables read live is the one `--opensm-log` names; without the log,
a site with UFM asks UFM's SM configuration (`fabric.ufm.smconf`), and the plan names it and warns of a
fallback as with the log (or says that it could not be read).
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabric.burnin.engine import RoutingEngine, engine_from_sm_config, engine_unread
from fabric.burnin.fabric_io import IbTools
from fabric.burnin.lft import parse_lfts
from fabric.burnin.plan import make_plan, retry_stages
from fabric.burnin.rates import line_rate_gbps
from fabric.burnin.render import flow_json, plan_json
from fabric.burnin.routes import Hca, build_routing
from fabric.captures import read_capture, read_capture_bytes
from fabric.design import Design, load_design
from fabric.errors import FabricError
from fabric.identify import ca_name_from_description
from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
from fabric.ports.ledger import OUT_OF_SERVICE, Ledger
from fabric.ports.resolve import Resolver
from fabric.topology import End, NodeType, Topology
from fabric.ufm.errors import UfmError
from fabric.ufm.site import site_client
from fabric.ufm.smconf import parse_sm_config
from provision.errors import CredentialError
from provision.site.model import Site
from provision.state import StateStore
from provision.state.identifiers import canonical_guid

LIVE = "dump_lfts (live)"


@dataclass(frozen=True)
class SiteFabric:
    topology: Topology
    lfts: str | bytes
    lfts_source: str


def design_line_rate(design: Design | None, site: Site) -> float:
    """The design's most common link rate per direction; else the GPU host class's HCA rate."""
    if design is not None:
        rates = Counter((lk.width, lk.speed) for lk in design.links if lk.width and lk.speed)
        if rates:
            (width, speed), _n = rates.most_common(1)[0]
            rate = line_rate_gbps(width, speed)
            if rate is not None:
                return rate
    for host in site.hosts():
        ib = site.host_class(host).ib
        rate = line_rate_gbps(ib.link_width, ib.link_speed) if host.role == "gpu" and ib is not None else None
        if rate is not None:
            return rate
    raise FabricError(f"{site.path}: no fabric design and no GPU host class with an ib: section, so the line "
                      "rate to judge against is unknown")


def read_fabric(site: Site, discovered: Path | None, routing: str, timeout_s: float) -> SiteFabric:
    tools = IbTools.for_site(site.path)
    if discovered is not None:
        top = parse_ibnetdiscover(read_capture(discovered, "--discovered"), str(discovered))
    else:
        top = tools.discover(timeout_s)
    if routing == "live":
        return SiteFabric(top, tools.dump_lfts(timeout_s), LIVE)
    return SiteFabric(top, read_capture_bytes(Path(routing), "--routing"), routing)


def ufm_engine(site: Site) -> RoutingEngine | None:
    """The routing engine UFM's SM configuration names; None when the site has no UFM."""
    fabric = site.spec.fabric
    if fabric is None or fabric.ufm is None:
        return None
    source = f"UFM's SM configuration (GET {str(fabric.ufm.url).rstrip('/')}/ufmRest/app/smconf)"

    async def read() -> str:
        client = site_client(site)
        assert client is not None
        async with client:
            return await client.sm_config()

    try:
        return engine_from_sm_config(parse_sm_config(asyncio.run(read())), source)
    except (UfmError, CredentialError) as exc:
        return engine_unread(source, f"not read: {exc}")




def ledger_out_of_service(store: StateStore) -> dict[End, str]:
    """Ends of links the port ledger has out of service (planned, disabled, failed to apply or refused
    re-enabling) -> why, so the plan goes around them even before the discovery shows them down."""
    out: dict[End, str] = {}
    for entry in Ledger(store).current().values():
        if entry.state in OUT_OF_SERVICE:
            for end in entry.ends:
                out[End(canonical_guid(end.guid) or end.guid, end.port)] = (
                    f"the port ledger has its link {entry.state} ({entry.why}): planned around")
    return out


def hosts_left_out(top: Topology, hosts: Collection[str], ledger: Mapping[End, str] | None = None,
                   ) -> dict[str, str]:
    """Hosts with an HCA port the discovery shows down or disabled, or the port ledger has out of service,
    -> why they are left out."""
    out: dict[str, str] = {}
    for end, why in (ledger or {}).items():
        node = top.nodes.get(end.guid)
        label = ca_name_from_description(node.description) if node and node.type is not NodeType.SWITCH else None
        if label is None:  # a switch end: its HCA peer, if any
            peer = next((lk.other(end) for lk in top.links if end in (lk.a, lk.b)), None)
            pnode = top.nodes.get(peer.guid) if peer else None
            label = ca_name_from_description(pnode.description) if pnode and pnode.type is not NodeType.SWITCH \
                else None
        if label is not None and label.split("/", 1)[0] in hosts:
            out.setdefault(label.split("/", 1)[0], f"{label}: {why}")
    for down in top.down_ports:
        node = top.nodes.get(down.end.guid)
        if node is None or node.type is NodeType.SWITCH:
            continue
        label = ca_name_from_description(node.description)
        if label is not None and label.split("/", 1)[0] in hosts:
            out.setdefault(label.split("/", 1)[0], f"{label} port {down.end.port} is {down.state}: planned around "
                           "(re-enable it with `fabric ports` once repaired, then plan again)")
    return out


def _missing_hcas(site: Site, hcas: Collection[Hca], hosts: Collection[str]) -> dict[str, str]:
    """Hosts with fewer HCAs on the fabric than their class has: not all their links can be burned."""
    seen: dict[str, list[str]] = {}
    for h in hcas:
        seen.setdefault(h.host, []).append(h.name.split("/", 1)[-1])
    out = {}
    for name in hosts:
        host = site.host(name)
        ib = site.host_class(host).ib if host is not None else None
        if ib is not None and len(seen.get(name, [])) < ib.hca_count:
            out[name] = (f"only {len(seen.get(name, []))} of its {ib.hca_count} HCAs take part (seen: "
                         f"{', '.join(sorted(seen.get(name, []))) or 'none'}): a cable or port is down or the SM has "
                         "not routed it; fix it, then plan again")
    return out


def site_hosts(site: Site, pattern: str | None, only: Collection[str] | None = None) -> list[str]:
    names = [h.hostname for h in site.hosts() if h.role == "gpu"]
    if pattern is not None:
        names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if only is not None:
        names = [n for n in names if n in only]
    return names


def plan_for_site(site: Site, fabric: SiteFabric, hosts: Collection[str], floor_pct: float,
                  ledger: Mapping[End, str] | None = None, engine: RoutingEngine | None = None) -> dict[str, Any]:
    """The plan's JSON for these hosts, with the site's floor, switch LIDs and located link ends."""
    top = fabric.topology
    skipped = hosts_left_out(top, hosts, ledger)
    chosen = [h for h in hosts if h not in skipped]
    if not chosen:
        raise FabricError("no GPU host is left to burn in" + (f" ({len(skipped)} left out: "
                          f"{next(iter(skipped.values()))})" if skipped else ""))
    dump = parse_lfts(fabric.lfts, fabric.lfts_source)
    routing = build_routing(top, dump, set(chosen))
    short = _missing_hcas(site, routing.hcas, chosen)
    if short:
        skipped.update(short)
        chosen = [h for h in chosen if h not in short]
        if not chosen:
            raise FabricError(f"no GPU host is left to burn in ({next(iter(short.values()))})")
        routing = build_routing(top, dump, set(chosen))
    plan = make_plan(routing)
    if engine is None and fabric.lfts_source == LIVE:
        engine = ufm_engine(site)
    out = plan_json(plan, engine)
    design = load_design(site.fabric_design) if site.fabric_design is not None else None
    rate = design_line_rate(design, site)
    resolver = Resolver(top, design)
    out["site"] = site.name
    out["line_rate_gbps"] = rate
    out["floor_gbps"] = round(rate * floor_pct / 100.0, 3)
    out["skipped_hosts"] = [{"host": h, "reason": why} for h, why in sorted(skipped.items())]
    for entry in out["links"] + out["not_routed"]:
        tail, head = entry["link"].split("->")
        entry["ends"] = [_describe(resolver, tail), _describe(resolver, head)]
    return out


def _describe(resolver: Resolver, text: str) -> str:
    guid, _, port = text.partition("[")
    end = End(guid, int(port.rstrip("]")))
    try:
        return resolver.link_end(end).describe()
    except (KeyError, ValueError):
        return text


def retry_for(site: Site, fabric: SiteFabric, plan: Mapping[str, Any], targets: Collection[str],
              avoid: Collection[str]) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """Extra stages (as the plan's JSON has them) that burn `targets` again around the `avoid` links, for the
    plan's hosts on the fabric as it is now; and the targets they cannot reach."""
    hosts = {f[k] for stage in plan.get("stages", []) for f in stage for k in ("src_host", "dst_host")}
    routing = build_routing(fabric.topology, parse_lfts(fabric.lfts, fabric.lfts_source), hosts)
    index = {str(link): i for i, link in enumerate(routing.links)}
    stages, left = retry_stages(routing, {index[t] for t in targets if t in index},
                                {index[a] for a in avoid if a in index})
    missing = [t for t in targets if t not in index] + [str(routing.links[i]) for i in sorted(left)]
    return [[flow_json(routing, f) for f in stage] for stage in stages], missing
