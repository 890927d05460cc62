"""What a killed apply left: the changes it had asked of the BMCs (its open intents), closed `reconciled` by the
inventory that read those BMCs afterwards, each with a line saying what the BMC shows and what the next apply does
about it, decided as the apply decides it (step.py and provision/bios/step.py).

A firmware update the BMC holds for the next reboot (a Scheduled job that installs one of the pin's drifted
components: `HostFirmware.staged_job`, the apply's own test) is activated by the next apply's reboot, not sent again;
any other Scheduled FirmwareUpdate job is not this change. A BIOS change waiting in a Scheduled BIOSConfiguration job
(`jobs.bios_job`) is activated by a reboot where the attributes it holds are the baseline's (the apply reads them
from Bios/Settings before it would PATCH), else PATCHed again.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.bmc.reconcile import line
from provision.firmware.drift import Judgement
from provision.firmware.jobs import bios_job
from provision.firmware.read import HostFirmware
from provision.firmware.reasons import ACTIONS
from provision.firmware.table import FirmwareRow, read_rows
from provision.state import StateStore
from provision.state.intents import Intent, open_intents, reconcile

LANDED = "the BMC shows the host on its baseline: not changed again"
NOT_LANDED = "the BMC shows the host still off its baseline: the next apply changes it"
THEN = "the next apply reboots the host without sending it again"
# No inventory row for the host: nothing shows whether the change landed. Closing the intent is still safe: the
# apply plans only from an inventory (plan.py blocks a host never inventoried), so nothing is sent on its strength.
NOT_READ = ("not read: no inventory of the host is recorded, so nothing shows whether the change landed; the next "
            "apply holds the host back as never inventoried until `provision firmware inventory` reads its BMC, and "
            "plans from that reading")


def what_the_bmc_shows(action: str, target: str, row: FirmwareRow | None) -> str:
    """What the last inventory (`row`) shows of a dead run's change (`action`, to `target` as its intent says):
    done, held by the BMC for the next reboot, or not there; or, with no row, that nothing was read."""
    if row is None:
        return NOT_READ
    if row.on_baseline:
        return LANDED
    found = HostFirmware.from_json(row.inventory)
    judged = Judgement.from_json(row.judgement)
    if action == "firmware_update":
        # The update the next apply plans for this pin: its drifted components the BMC reports (the BMC's own
        # firmware installs at once: never staged).
        keys = [d.component for d in judged.firmware if f"{d.pin} {d.wanted}" == target and d.seen is not None
                and d.component_kind != "bmc"]
        job = found.staged_job(keys)
        if job is not None:
            return f"the BMC holds it for the next reboot (job {job.id} {job.state}): {THEN}"
    elif (job := bios_job(found.jobs)) is not None:
        return (f"the BMC holds a BIOS change for the next reboot (job {job.id} {job.state}): where it holds these "
                f"settings, {THEN}")
    return NOT_LANDED


def reconcile_dead(store: StateStore, hosts: Sequence[str], command: str) -> dict[str, tuple[str, ...]]:
    """Close, with what the BMC showed now, the changes a killed apply had asked of the BMCs just read (`hosts`);
    what was found, a line per change, by host."""
    if not hosts:
        return {}
    rows = read_rows(store, hosts)
    done: dict[str, list[Intent]] = {}
    for intent in open_intents(store, system="bmc", hosts=hosts, dead_only=True):
        if intent.action in ACTIONS:
            done.setdefault(intent.host, []).append(intent)
    said: dict[str, tuple[str, ...]] = {}
    for host, intents in done.items():
        row = rows.get(host)
        said[host] = tuple(line(i, what_the_bmc_shows(i.action, i.target, row)) for i in intents)
        observed = {"on_baseline": row.on_baseline} if row is not None else {"read": False}
        reconcile(store, host, intents, observed, command=command, lines=said[host])
    return said
