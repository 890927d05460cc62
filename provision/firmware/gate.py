"""`policy.golden_requires_baseline`: which hosts may not earn golden because of their firmware, and why.

A host whose class declares a firmware baseline earns golden only when its last inventory matched it: never
inventoried, judged off the baseline, or with a part that could not be read (unknown is never on baseline)
keeps it out. Hosts of a class without a baseline, and every host where the policy is off, pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from provision.firmware.drift import Judgement
from provision.firmware.table import read_rows
from provision.site.model import Site
from provision.state.store import StateStore


def baseline_of(site: Site, hostname: str) -> bool:
    host = site.host(hostname)
    if host is None:
        return False
    baseline = site.host_class(host).firmware
    return baseline is not None and bool(baseline.components or baseline.bios)


def off_baseline(site: Site, store: StateStore, hostnames: Iterable[str] | None = None) -> dict[str, str]:
    """Host -> why it is not on its baseline, for the hosts the policy holds back."""
    if not site.spec.policy.golden_requires_baseline:
        return {}
    names = [h.hostname for h in site.hosts()] if hostnames is None else list(hostnames)
    checked = [n for n in names if baseline_of(site, n)]
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
