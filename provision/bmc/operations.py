"""The BMC commands as library calls: one step run each, and harvest-macs' exports of every harvested host."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from provision.bmc.export import default_paths, write_exports
from provision.bmc.power import PowerAction
from provision.bmc.step import HarvestStep, PowerStep, PxeStep, RunOptions, inventory_view
from provision.site import Host, Site
from provision.state import State, StateStore
from provision.steps.runner import HostResult, Progress


def _site_order(site: Site, results: list[HostResult]) -> list[HostResult]:
    order = {h.hostname: i for i, h in enumerate(site.hosts())}
    return sorted(results, key=lambda r: order.get(r.host, 0))


def contested_pxe_macs(store: StateStore) -> dict[str, list[str]]:
    """PXE MACs claimed by hosts whose harvest failed `duplicate_pxe_mac` (this run's or an earlier one's,
    until they are harvested again): the DHCP exports reserve these MACs for no host."""
    out: dict[str, list[str]] = {}
    for record in store.hosts():
        evidence = record.evidence if isinstance(record.evidence, dict) else {}
        if record.state is State.failed and record.reason == "duplicate_pxe_mac" and evidence.get("pxe_mac"):
            out.setdefault(str(evidence["pxe_mac"]), []).append(record.hostname)
    return out


async def harvest_macs(site: Site, store: StateStore, hosts: Sequence[Host], options: RunOptions,
                       exports: Mapping[str, Path | None], progress: Progress | None = None,
                       ) -> tuple[list[HostResult], dict[str, Path]]:
    """Harvest `hosts`, then write the exports (CSV, YAML, DHCP) of every harvested host of the site.
    `exports` overrides the default paths (beside the state store) of the ones given."""
    results = await HarvestStep(site, store, options).run(hosts, progress)
    # This run's summaries are the freshest; every other harvested host's comes from its facts.
    inventories: dict[str, Mapping[str, Any]] = {
        name: inventory_view(facts) for name, facts in store.facts_many([h.hostname for h in site.hosts()]).items()
        if facts.pxe_mac or facts.macs}
    inventories.update({r.host: r.data for r in results if r.ok and r.data and not r.skipped})
    paths = {name: exports.get(name) or path for name, path in default_paths(site, store.path.parent).items()}
    write_exports(site, inventories, paths, contested_pxe_macs(store))
    return _site_order(site, results), paths


async def pxe_boot(site: Site, store: StateStore, hosts: Sequence[Host], options: RunOptions,
                   progress: Progress | None = None) -> list[HostResult]:
    results = await PxeStep(site, store, options).run(hosts, progress)
    return sorted(results, key=lambda r: r.host)


async def power(site: Site, store: StateStore, hosts: Sequence[Host], action: PowerAction, options: RunOptions,
                progress: Progress | None = None) -> list[HostResult]:
    results = await PowerStep(site, store, action, options).run(hosts, progress)
    return sorted(results, key=lambda r: r.host)
