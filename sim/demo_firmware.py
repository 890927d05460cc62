"""The demo's firmware stage: every BMC's firmware and BIOS against the host class's baseline, the drift caught,
fixed through Redfish and health-checked again, before the burn-in that earns golden.

inventory/sim/firmware-sim.yml takes two hosts off the baseline (one's NIC firmware below the minimum, another's
BIOS power profile left on). `provision firmware inventory` reads every BMC's FirmwareInventory and Bios and fails
them (firmware_drift, bios_drift: the component, the version seen, the one wanted); `provision firmware plan` and
`provision bios plan` show the waves (canary first); `provision firmware apply` (SimpleUpdate from the controller's
image server, the task followed to its end, a reboot, a read-back) and `provision bios apply` (Bios/Settings PATCH,
a reboot, a read-back) put them back on it, and the hosts re-enter the flow at `configured`: `provision health`
checks them again, and the burn-in stage that follows earns them golden with the others (the golden gate,
policy.golden_requires_baseline, lets only inventoried hosts on their baseline through). The report shows the
fleet's versions per component beside the baseline, and each drift and fix.
"""

from __future__ import annotations

from provision.cli import main as provision_main
from provision.command.output import console, esc
from provision.firmware.reasons import DRIFT_REASONS
from provision.state import StateStore

BASELINE_COMMANDS = ("firmware-inventory", "firmware-apply", "bios-apply")


def _drifted(db: str) -> list[str]:
    with StateStore(db) as store:
        return sorted(r.hostname for r in store.hosts() if r.reason in DRIFT_REASONS)


def _journey(db: str, hosts: list[str]) -> None:
    """Each drifted host's way through this stage, from its history: caught, fixed, checked again."""
    with StateStore(db) as store:
        for host in hosts:
            steps = [e for e in store.history(host) if e.command in BASELINE_COMMANDS or e.command.startswith("health")]
            path = " -> ".join(f"{e.to_state.value}" + (f" ({e.reason})" if e.reason else "") + f" by {e.command}"
                               for e in steps[-3:])
            console.print(f"{esc(host)}: {esc(path)}", highlight=False, soft_wrap=True)


def run_firmware_stage(site_file: str, db: str) -> int:
    code = provision_main(["firmware", "inventory", "--site", site_file])
    drifted = _drifted(db)
    console.print(f"off the baseline: {', '.join(drifted) or 'none'}", soft_wrap=True)
    for operation in ("firmware", "bios"):
        code = max(code, provision_main([operation, "plan", "--site", site_file]))
    for operation in ("firmware", "bios"):
        code = max(code, provision_main([operation, "apply", "--site", site_file]))
    # back at configured: health again before the burn-in (the next stages) earns golden
    code = max(code, provision_main(["health", "--site", site_file]))
    _journey(db, drifted)
    return code
