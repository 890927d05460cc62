"""The README's main job: a whole bring-up of the embedded simulated site, end to end.

Each step is the same command a user would type, run against a fresh state database so the demo
always starts from `declared`. Steps whose command is not part of this version are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

from provision.cli import app as provision_app
from provision.cli import main as provision_main
from provision.cli.context import default_site_path
from provision.cli.output import console
from sim.__main__ import open_lab

# (title, provision command line); the state database and site are added to each.
STEPS: list[tuple[str, list[str]]] = [
    ("Harvest MACs from every BMC", ["harvest-macs"]),
    ("Arm one-time PXE boot and power on", ["pxe-boot"]),
    ("Enlist, commission and deploy through MAAS", ["maas", "deploy"]),
    ("Health checks on every host", ["health"]),
    ("Lifecycle status", ["status"]),
    ("Golden hostfile", ["golden", "--format", "deepspeed"]),
]


def _available(command: str) -> bool:
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
        console.rule("[bold]simulated lab is up")
        for name, info in lab.status().items():
            console.print(f"  {name:<14} pid {info['pid']}")
        for title, argv in STEPS:
            if not _available(argv[0]):
                continue
            console.rule(f"[bold]{title}[/]  [dim]provision {' '.join(argv)}")
            code = provision_main([*argv, "--site", site_file])
            # A step reporting failed hosts (exit 1) is part of the story; the demo goes on.
            worst = max(worst, code)
        console.rule("[bold]stopping the lab")
    return 0 if worst <= 1 else worst
