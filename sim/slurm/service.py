"""Plugs the lab's Slurm into `python -m sim up` when the site has a `slurm:` section.

One supervisor process (`python -m sim.slurm serve`) runs `SlurmLab` for the site: a slurmd for every host of
the partitions' classes (on this machine: the Debian test hosts are chroots without an init, and the slurm roles
are tested on them separately, tests/ansible/test_slurm_roles.py), the partitions as the site declares them. It
exports SLURM_CONF, which bringup's Slurm client reads as the real commands do.
"""

from __future__ import annotations

import os
import shutil

from sim.lab import LabContext, LabError, Service, python_module

SUBDIR = "slurm"
READY = "ready"


def services(ctx: LabContext) -> list[Service]:
    if ctx.site.spec.slurm is None:
        return []
    missing = [tool for tool in ("slurmctld", "slurmd", "munged", "sinfo") if shutil.which(tool) is None]
    if missing:
        raise LabError(f"the site has a slurm section and the lab needs {', '.join(missing)} (deps/apt/slurm.txt)")
    if os.geteuid() != 0:
        raise LabError("the lab's Slurm runs its daemons as root (SlurmUser=root): run as root")
    directory = ctx.run_dir / SUBDIR
    return [Service(
        name="slurm",
        argv=python_module("sim.slurm", "serve", "--site", str(ctx.site.path), "--run-dir", str(directory)),
        probe=lambda: (directory / READY).exists(),
        start_timeout_s=120.0,
        stop_timeout_s=30.0,
        exports={"SLURM_CONF": str(directory / "slurm.conf")},
    )]
