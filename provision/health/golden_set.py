"""Earning the golden state: a host is golden once healthy and burned in, or healthy alone on a site
whose policy does not require burn-in (`policy.golden_requires_burn_in: false`). Losing it needs nothing
here: any later failure moves the host to `failed`, and it earns golden again from there.
"""

from __future__ import annotations

from collections.abc import Iterable

from provision.site.model import Site
from provision.state import Change, Outcome, State, StateStore

COMMAND = "golden"


def promotion_sources(site: Site) -> tuple[State, ...]:
    """The states from which a host may become golden on this site."""
    if site.spec.policy.golden_requires_burn_in:
        return (State.burned_in,)
    return (State.healthy, State.burned_in)


def promote_golden(site: Site, store: StateStore, hosts: Iterable[str] | None = None) -> list[Outcome]:
    """Move every eligible host (of `hosts`, default all) to golden in one transaction; returns the moves."""
    sources = promotion_sources(site)
    wanted = None if hosts is None else set(hosts)
    candidates = [
        name
        for state in sources
        for name in store.in_state(state)
        if wanted is None or name in wanted
    ]
    if not candidates:
        return []
    skip = frozenset({State.burned_in}) if State.healthy in sources else frozenset()
    changes = [Change(name, State.golden, COMMAND, may_skip=skip) for name in sorted(candidates)]
    return [o for o in store.transition_many(changes) if o.changed]
