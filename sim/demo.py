"""The README's main job: a whole bring-up of the embedded simulated site, end to end.

Each step is the same command a user would type, run against a fresh state database so the demo
always starts from `declared`. Steps whose command is not part of this version are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

from fabric.cli import main as fabric_main
from provision.cli import app as provision_app
from provision.cli import load_commands
from provision.cli import main as provision_main
from provision.cli.context import default_site_path
from provision.cli.output import console
from sim.__main__ import open_lab

# (title, program, command line); `--site` is added to each, and the state database comes from
# $BRINGUP_STATE_DB, which the demo points at a fresh file.
STEPS: list[tuple[str, str, list[str]]] = [
    ("Harvest MACs from every BMC", "provision", ["harvest-macs"]),
    ("Arm one-time PXE boot and power on", "provision", ["pxe-boot"]),
    ("Enlist, commission and deploy through MAAS", "provision", ["maas", "deploy", "--poll", "0.5"]),
    ("Validate the InfiniBand cabling against the design", "fabric", ["validate", "--live"]),
    ("Health checks on every host", "provision", ["health"]),
    ("Lifecycle status", "provision", ["status"]),
    ("Golden hostfile", "provision", ["golden", "--format", "deepspeed"]),
]


def _available(command: str) -> bool:
    load_commands()
    names = {
        c.name or (c.callback.__name__.replace("_", "-") if c.callback else "")
        for c in provision_app.registered_commands
    }
    names |= {g.name for g in provision_app.registered_groups if g.name}
    return command in names


def run_demo(site_path: Path | None) -> int:
    lab = open_lab(site_path)
    site_file = str(site_path or default_site_path())
    db = lab.run_dir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["BRINGUP_STATE_DB"] = str(db)
    worst = 0
    with lab.running_lab():
        os.environ.update(lab.exports())  # endpoints, keys and files the simulators publish for clients
        console.rule("[bold]simulated lab is up")
        for name, info in lab.status().items():
            console.print(f"  {name:<14} pid {info['pid']}")
        for title, program, argv in STEPS:
            if program == "provision" and not _available(argv[0]):
                continue
            console.rule(f"[bold]{title}[/]  [dim]{program} {' '.join(argv)}")
            run = fabric_main if program == "fabric" else provision_main
            code = run([*argv, "--site", site_file])
            # A step reporting failed hosts (exit 1) is part of the story; the demo goes on.
            worst = max(worst, code)
        console.rule("[bold]stopping the lab")
    return 0 if worst <= 1 else worst
