"""The Debian test hosts as an opt-in lab service: `python -m sim up --with testhosts[=N]`.

A test site of its own (the embedded site's first N GPU hosts, `lab.py`), for a site without GPU hosts of
its own in the lab; a site with a health-faults file gets its GPU hosts as test hosts from `service.py`
(`site_lab.py`), and the two use the same addresses: do not start both. The service is one supervisor
process (`python -m sim.testhosts serve`) that starts the hosts, says it is ready, and
on SIGTERM (what `sim down` sends) stops every host and the repository server before it exits.
"""

from __future__ import annotations

import os
import shutil

from sim.lab import LabContext, LabError, Service, python_module
from sim.testhosts.lab import READY_FILE, STATE_FILE, down

DEFAULT_COUNT = 4
SUBDIR = "testhosts"  # under the lab's run directory
TOOLS = ("debootstrap", "equivs-build", "unshare", "ssh", "objcopy", "gpg", "mount")


def services(ctx: LabContext, arg: str | None = None) -> list[Service]:
    try:
        count = DEFAULT_COUNT if arg in (None, "") else int(str(arg))
    except ValueError:
        raise LabError(f"--with testhosts={arg}: the count must be a number") from None
    if count < 1:
        raise LabError(f"--with testhosts={count}: at least one host")
    if os.geteuid() != 0:
        raise LabError("--with testhosts needs root (overlay mounts, chroot, one sshd per host)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(f"--with testhosts needs {', '.join(missing)} (deps/apt/ansible.txt)")
    directory = ctx.run_dir / SUBDIR
    return [Service(
        name="testhosts",
        argv=python_module("sim.testhosts", "serve", "--count", str(count), "--run-dir", str(directory)),
        probe=lambda: (directory / READY_FILE).exists(),
        # The first start runs debootstrap and builds the stand-in repository (cached afterwards).
        start_timeout_s=1800.0,
        stop_timeout_s=120.0,
        exports={"BRINGUP_TESTHOSTS_INVENTORY": str(directory / "inventory" / "testhosts.bringup_state.yml")},
    )]


def cleanup(ctx: LabContext) -> list[str]:
    """After `sim down`: stop hosts a supervisor left behind (killed before it could stop them)."""
    directory = ctx.run_dir / SUBDIR
    if not (directory / STATE_FILE).exists() and not (directory / "hosts").is_dir():
        return []
    return down(directory)
