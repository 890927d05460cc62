"""Plugs the lab's Slurm into `python -m sim up` when the site has a `slurm:` section.

One supervisor process (`python -m sim.slurm serve`) runs `SlurmLab` for the site: a slurmd for every host of
the partitions' classes (on this machine: the Debian test hosts are chroots without an init, and the slurm roles
are tested on them separately, tests/ansible/test_slurm_roles.py), the partitions as the site declares them. It
exports SLURM_CONF, which bringup's Slurm client reads as the real commands do.
"""

from __future__ import annotations

import os
import shutil

from provision.site.model import Site
from sim.lab import LabContext, LabError, Service, python_module
from sim.slurm.lab import Partition, SlurmLabSpec

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


def spec_for(site: Site) -> SlurmLabSpec:
    slurm = site.spec.slurm
    if slurm is None:
        raise SystemExit(f"site {site.name} has no slurm section")
    hosts = site.hosts()
    classes = {c for p in slurm.partitions for c in p.classes}
    nodes = tuple(h.hostname for h in hosts if h.host_class in classes)
    partitions = tuple(Partition(p.name, tuple(h.hostname for h in hosts if h.host_class in p.classes), p.default)
                       for p in slurm.partitions)
    # No Gres: this machine's slurmds find no GPU (SlurmLabSpec.gpus); the slurm roles write the hosts' gres.conf.
    # A requeued job may start again after cred_expire (120 s by default; 5 is Slurm's least) and the scheduler
    # looks every second: the demo's job, requeued after a lost node, goes on within seconds.
    return SlurmLabSpec(slurm.cluster_name, nodes, partitions, cred_expire_s=5,
                        extra=("SchedulerParameters=sched_interval=1,bf_interval=1",))
