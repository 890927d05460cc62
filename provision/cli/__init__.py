"""`provision`: the controller's command line.

Command modules are imported on demand: `provision status` loads only the lifecycle commands, so it
does not pay for httpx, asyncssh and the Redfish and health packages. `--help`, an unknown command
or no command loads them all.
"""

from __future__ import annotations

import sys
from importlib import import_module

from provision.cli.app import app
from provision.command.exits import run_app

COMMAND_MODULES = {
    "status": "lifecycle_cmds",
    "history": "lifecycle_cmds",
    "mark": "lifecycle_cmds",
    "record": "lifecycle_cmds",
    "golden": "lifecycle_cmds",
    "maas": "maas_cmds",
    "harvest-macs": "bmc_cmds",
    "pxe-boot": "bmc_cmds",
    "power": "bmc_cmds",
    "health": "health_cmds",
    "bisect": "health_cmds",
    "steps": "lifecycle_cmds",
    "db": "db_cmds",
    "report": "report_cmds",
    "metrics": "metrics_cmds",
    "ethernet": "ethernet_cmds",
    "ship": "job_cmds",
    "anomalies": "job_cmds",
    "slurm": "slurm_cmds",
    "firmware": "firmware_cmds",
    "bios": "firmware_cmds",
}


def load_commands(argv: list[str] | None = None) -> None:
    """Register the commands `argv` needs on `app` (all of them when it names none we know)."""
    first = next((arg for arg in argv or [] if not arg.startswith("-")), None)
    wanted = {COMMAND_MODULES[first]} if first in COMMAND_MODULES else set(COMMAND_MODULES.values())
    for module in sorted(wanted):
        import_module(f"provision.cli.{module}")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error a user can cause becomes one readable message and exit code 1."""
    args = sys.argv[1:] if argv is None else argv
    load_commands(args)
    return run_app(app, args, "provision")


def entry() -> None:
    sys.exit(main())


__all__ = ["COMMAND_MODULES", "app", "entry", "load_commands", "main"]
