"""Every probe and check the agent knows, built from the host's expectations."""

from __future__ import annotations

import sys
from pathlib import Path

from . import flint, gpu, ib, kernel_log, long_checks, mlxfw, nvlink, pcie, storage, system, topology
from .check import Check
from .collectors import adjtimex, cpu_governors, ib_sysfs, pcie_links, proc_file
from .config import Expectations
from .probes import Probe

CHECKS: tuple[Check, ...] = (
    *gpu.CHECKS, *nvlink.CHECKS, *topology.CHECKS, *kernel_log.CHECKS, *pcie.CHECKS, *ib.CHECKS, *mlxfw.CHECKS,
    *system.CHECKS, *storage.CHECKS, *long_checks.CHECKS,
)

# The directory that holds the ``tools`` package: the GPU worker runs as ``-m tools.health.gpu_worker``.
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def probes(exp: Expectations) -> dict[str, Probe]:
    t = exp.timeouts.command_s
    items = [
        Probe("nvidia-smi-q", ("nvidia-smi", "-q"), timeout_s=t),
        Probe("nvidia-smi-nvlink-s", ("nvidia-smi", "nvlink", "-s"), timeout_s=t),
        Probe("nvidia-smi-nvlink-e", ("nvidia-smi", "nvlink", "-e"), timeout_s=t),
        Probe("nvidia-smi-topo-m", ("nvidia-smi", "topo", "-m"), timeout_s=t),
        Probe("dmesg", ("dmesg", "-x"), timeout_s=t),
        Probe("journalctl-k", ("journalctl", "-k", "-b", "--no-pager", "-q"), timeout_s=t),
        Probe("pcie-links", collect=pcie_links, timeout_s=t),
        Probe("ib-sysfs", collect=ib_sysfs, timeout_s=t),
        Probe("proc-modules", collect=proc_file("proc/modules", "proc-modules"), timeout_s=t),
        Probe("proc-swaps", collect=proc_file("proc/swaps", "proc-swaps"), timeout_s=t),
        Probe("cpu-governor", collect=cpu_governors, timeout_s=t),
        Probe("adjtimex", collect=adjtimex, timeout_s=t),
        Probe("systemctl-fabricmanager", ("systemctl", "is-active", "nvidia-fabricmanager"), timeout_s=t),
        Probe("df", ("df", "-P", "-B1", "-x", "tmpfs", "-x", "devtmpfs", "-x", "squashfs", "-x", "overlay"),
              timeout_s=t),
        Probe("zpool-status", ("zpool", "status", "-p"), timeout_s=t),
    ]
    if exp.ib.firmware_query:
        items.append(Probe(mlxfw.PROBE, ("mlxfwmanager", "--query"), timeout_s=t))
        # without mlxfwmanager: flint per HCA (it prints nothing where mlxfwmanager is installed)
        items.append(Probe(flint.PROBE, ("sh", "-c", flint.SCRIPT), timeout_s=max(t, 30.0)))
    if exp.system.docker_image:
        items.append(Probe("docker-gpus", ("docker", "run", "--rm", "--gpus", "all", exp.system.docker_image,
                                           "nvidia-smi", "-L"), timeout_s=exp.timeouts.docker_s))
    if exp.long is not None:
        lx = exp.long
        python = lx.python or sys.executable
        env = (*sorted(lx.env.items()), ("PYTHONPATH", _PACKAGE_PARENT), ("NCCL_NVLS_ENABLE", "0"),
               ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1"))
        worker = (python, "-m", "tools.health.gpu_worker")
        margin = exp.timeouts.long_margin_s
        items += [
            Probe("long-stress", (*worker, "stress", "--seconds", f"{lx.stress_seconds:g}", "--size",
                                  str(lx.matmul_size), "--ceiling"), timeout_s=lx.stress_seconds + margin, env=env),
            Probe("long-membw", (*worker, "membw", "--mib", str(lx.membw_mib)), timeout_s=margin, env=env),
            Probe("long-allreduce", (*worker, "allreduce", "--sizes-mib",
                                     ",".join(str(s) for s in lx.allreduce_sizes_mib), "--iters",
                                     str(lx.allreduce_iters)), timeout_s=margin, env=env),
        ]
    return {p.name: p for p in items}


def select(level: str, only: tuple[str, ...] = ()) -> tuple[Check, ...]:
    levels = {"fast": ("fast",), "long": ("long",), "all": ("fast", "long")}[level]
    chosen = tuple(c for c in CHECKS if c.level in levels and (not only or c.name in only))
    return chosen
