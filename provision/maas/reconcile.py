"""MAAS actions a dead run asked for and never recorded, read back on the next `provision maas deploy`.

The deploy step writes an intent before each action it asks of MAAS (enlist, commission, allocate, deploy,
release; `provision.state.intents`), closed by the host's next move. One left open by a run that is gone is
read back here, before the run selects its hosts, from MAAS's machine list (by system id; an enlistment by its
PXE MAC): the intent is closed `reconciled` with MAAS's status, the host's history says so
(`intent_reconciled`), and the step then goes on from that status as on any re-run (MAAS's status decides what
happens next, so a deployment the dead run started is waited for, not asked again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provision.maas.machine import MaasMachine
from provision.state import StateStore
from provision.state.intents import Intent, open_intents, reconcile

SYSTEM = "maas"
SHOWN = 64  # characters of a value MAAS reports
ENLIST = "enlist"  # its subject is the PXE MAC: MAAS gives the system id only in its answer


def observed(machine: MaasMachine | None) -> dict[str, Any]:
    if machine is None:
        return {"machine": None}
    # Short values: what a hostile region puts in them goes into a line of output and a history note.
    return {"system_id": machine.system_id[:SHOWN], "status_name": machine.status_name[:SHOWN],
            "status_message": machine.status_message[:4 * SHOWN], "power_state": machine.power_state[:SHOWN]}


def reconcile_maas(store: StateStore, hosts: Iterable[str], machines: Iterable[MaasMachine],
                   by_mac: Mapping[str, MaasMachine], *, command: str) -> dict[str, list[str]]:
    """Close every dead run's open MAAS intent of `hosts` with the machine's status; the lines, by host."""
    by_id = {m.system_id: m for m in machines}
    grouped: dict[str, list[Intent]] = {}
    for intent in open_intents(store, system=SYSTEM, hosts=set(hosts), dead_only=True):
        grouped.setdefault(intent.host, []).append(intent)
    out: dict[str, list[str]] = {}
    for host, intents in grouped.items():
        # The newest intent names the machine the dead run last acted on.
        last = intents[-1]
        machine = by_mac.get(last.subject) if last.action == ENLIST else by_id.get(last.subject)
        seen = observed(machine)
        said = f"MAAS says {seen['status_name']}" if machine else f"MAAS has no machine {last.subject}"
        lines = [f"a run of `{i.command}` died after asking MAAS to {i.action} {host} (machine {i.subject}, to "
                 f"{i.target}); {said}, recorded" for i in intents]
        reconcile(store, host, intents, seen, command=command, lines=lines)
        out[host] = lines
    return out
