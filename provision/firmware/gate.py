"""`policy.golden_requires_baseline`: which hosts may not earn golden because of their firmware, and why.

A host whose class declares a firmware baseline earns golden only when its last inventory matched it: never
inventoried, judged off the baseline, or with a part that could not be read (unknown is never on baseline)
keeps it out. Hosts of a class without a baseline, and every host where the policy is off, pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from provision.firmware.drift import Judgement
from provision.firmware.table import read_rows
from provision.site.firmware import FirmwareBaseline
from provision.site.model import Site
from provision.state.store import StateStore


def declared_baselines(site: Site, hostnames: Iterable[str] | None = None) -> dict[str, FirmwareBaseline]:
    """Host -> its class's firmware baseline, for the hosts (all of the site's, or those named that it has) whose
    class declares one: a component pin or a BIOS attribute. The others are held to no baseline."""
    hosts = site.hosts() if hostnames is None else [h for n in hostnames if (h := site.host(n)) is not None]
    out: dict[str, FirmwareBaseline] = {}
    for host in hosts:
        baseline = site.host_class(host).firmware
        if baseline is not None and (baseline.components or baseline.bios):
            out[host.hostname] = baseline
    return out


def off_baseline(site: Site, store: StateStore, hostnames: Iterable[str] | None = None) -> dict[str, str]:
    """Host -> why it is not on its baseline, for the hosts the policy holds back."""
    if not site.spec.policy.golden_requires_baseline:
        return {}
    checked = list(declared_baselines(site, hostnames))
    if not checked:
        return {}
    rows = read_rows(store, checked)
    out: dict[str, str] = {}
    for name in checked:
        row = rows.get(name)
        if row is None:
            out[name] = "never inventoried: run `provision firmware inventory`"
            continue
        if row.on_baseline:
            continue
        judged = Judgement.from_json(row.judgement)
        parts = [d.line() for d in (*judged.firmware, *judged.bios)] + list(judged.unknown)
        out[name] = "; ".join(parts[:3]) + (f" (+{len(parts) - 3} more)" if len(parts) > 3 else "")
    return out
