"""The sync that ends every step moving hosts in or out of golden (`slurm.sync_after_steps`, default on).

`provision health`, `fabric burnin judge --record`, `fabric ports apply --apply` and `fabric ports reenable` call
it after recording: one line for their output. A Slurm that cannot be reached does not fail the step (its moves
are recorded; the next sync, or `provision slurm sync`, catches Slurm up): the line says so.
"""

from __future__ import annotations

import asyncio

from provision.site.model import Site
from provision.slurm.client import SlurmClient
from provision.slurm.errors import SlurmError
from provision.slurm.nodes import clean
from provision.slurm.plan import Action
from provision.state.store import StateStore


def sync_after_step(site: Site, store: StateStore) -> str | None:
    """Run the sync; its one-line outcome, or None when the site has no Slurm or does not want it here."""
    slurm = site.spec.slurm
    if slurm is None or not slurm.sync_after_steps:
        return None
    from provision.slurm.sync import sync

    try:
        result = asyncio.run(sync(site, store, SlurmClient(slurm)))
    except SlurmError as exc:
        return f"slurm sync: not done ({clean(str(exc), 300)}); `provision slurm sync` catches Slurm up"
    counts: dict[str, int] = {}
    for d in result.plan.acting():
        counts[d.action.value] = counts.get(d.action.value, 0) + 1
    done = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()) if what != Action.none.value) or "no change"
    tail = f"; {clean(result.error, 300)} (re-run `provision slurm sync`)" if result.error else ""
    missing = result.plan.missing_golden()
    if missing:
        tail += f"; golden hosts Slurm does not know: {', '.join(missing[:10])}"
    return f"slurm sync: {done}{tail}"
