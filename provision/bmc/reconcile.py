"""Changes a dead run asked of a BMC, finished on the next start: what the BMC really shows, recorded.

`pxe-boot` and `power on|off|cycle` write an intent before each boot override and each reset they send
(`provision.state.intents`) and close it with their record. One left open by a run that is gone (killed
between asking and recording) is read back here, before the command acts: one Redfish read of the system
per host (PowerState, boot override), the intents closed `reconciled` with it and a history note
(`intent_reconciled`), and a line for the command's output. A BMC that cannot be read leaves its intents
open (the host stays out of golden) and says why; the command then acts as it would have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from provision.bmc.harvest import find_system
from provision.bmc.power import BOOT_KEYS, power_state
from provision.bmc.triage import triage
from provision.redfish import RedfishClient
from provision.site import Host
from provision.state import StateStore
from provision.state.intents import Intent, open_intents, reconcile

SYSTEM = "bmc"
SHOWN = 64  # characters of a value the BMC reports
BOOT_OVERRIDE = "boot override"  # the actions these commands ask for: the boot override and `reset <ResetType>`;
RESET = "reset "  # other steps' BMC intents (firmware, BIOS) are theirs to reconcile


def reset_action(kind: str) -> str:
    return RESET + kind


def ours(intent: Intent) -> bool:
    return intent.action == BOOT_OVERRIDE or intent.action.startswith(RESET)
Session = Callable[[Host], AbstractAsyncContextManager[RedfishClient]]


def _short(value: Any) -> str | None:
    return None if value is None else str(value)[:SHOWN]


def said(intent: Intent, observed: Mapping[str, Any]) -> str:
    """What the BMC shows, as it bears on one intent."""
    state = observed["power_state"]
    if intent.action.startswith(RESET):
        how = "as asked" if state == intent.target else \
            "on its way" if state == f"Powering{intent.target}" else "not as asked"
        return f"{state} ({how})"
    boot = observed["boot"]
    override = f"{boot.get('BootSourceOverrideTarget')}/{boot.get('BootSourceOverrideEnabled')}"
    return f"boot override {override}, PowerState {state}"


def line(intent: Intent, what: str) -> str:
    return (f"a run of `{intent.command}` died after asking BMC {intent.subject} for {intent.action} of "
            f"{intent.host} (to {intent.target}); {what}")


async def _one(store: StateStore, host: Host, intents: list[Intent], session: Session, command: str,
               timeout_s: float) -> list[str]:
    try:
        async with asyncio.timeout(timeout_s), session(host) as bmc:
            system = await find_system(bmc)
    except Exception as exc:  # the BMC cannot tell us now: the intents stay open, the host out of golden
        failure = triage(exc, timeout_s=timeout_s)
        return [line(i, f"the BMC cannot be read now ({failure.reason}: {failure.detail}): left open")
                for i in intents]
    boot = system.data.get("Boot")
    # Short values: what a hostile BMC puts in them goes into a line of output and a history note.
    observed = {"power_state": power_state(system)[:SHOWN],
                "boot": {k: _short(boot.get(k)) for k in BOOT_KEYS} if isinstance(boot, Mapping) else {}}
    lines = [line(i, f"BMC says {said(i, observed)}, recorded") for i in intents]
    await asyncio.to_thread(reconcile, store, host.hostname, intents, observed, command=command, lines=lines)
    return lines


async def reconcile_bmcs(store: StateStore, hosts: Sequence[Host], session: Session, *, command: str,
                         concurrency: int, timeout_s: float) -> dict[str, list[str]]:
    """Read back every dead run's open BMC intent of `hosts`; the lines to show, by host."""
    by_name = {h.hostname: h for h in hosts}
    found = await asyncio.to_thread(open_intents, store, system=SYSTEM, hosts=by_name, dead_only=True)
    grouped: dict[str, list[Intent]] = {}
    for intent in filter(ours, found):
        grouped.setdefault(intent.host, []).append(intent)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def bounded(name: str, intents: list[Intent]) -> tuple[str, list[str]]:
        async with gate:
            return name, await _one(store, by_name[name], intents, session, command, timeout_s)

    return dict(await asyncio.gather(*(bounded(n, i) for n, i in grouped.items())))
