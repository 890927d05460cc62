"""Faults of the Slurm lab (lab.py): a node lost with everything it runs, as a host that loses power.

Killing a node's slurmd alone (`SlurmLab.kill_node`) is not a lost host here: every node is a slurmd of this
machine, and the node's slurmstepd and the job's tasks go on running without it (they were started detached).
`lose_node` finds them and ends them with it:

- the node's slurmstepd processes: each holds the node's own log open (`SlurmdLogFile=.../slurmd-%n.log`);
  neither their command line (`slurmstepd: [JOB.STEP]`) nor their environment names the node;
- the tasks and everything they started: Slurm puts `SLURMD_NODENAME=<node>` in every task's environment, and
  their children (torchrun's workers) inherit it.

They are all stopped first (SIGSTOP), so none of them reports an exit to srun or slurmctld, then the slurmd is
killed, then they are: to Slurm the node just stops answering, and it marks it DOWN after SlurmdTimeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from sim.slurm.lab import SlurmLab


def _fds(pid: str) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for fd in Path("/proc", pid, "fd").iterdir():
            with contextlib.suppress(OSError):
                out.append(os.readlink(fd))
    return out


def node_job_processes(lab: SlurmLab, node: str) -> list[int]:
    """The pids of the node's slurmstepd processes and of every process of its job steps."""
    log = os.path.realpath(lab.dir / "log" / f"slurmd-{node}.log")
    mark = f"SLURMD_NODENAME={node}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (cmdline.startswith(b"slurmstepd") and log in _fds(proc.name)) or mark in environ:
            pids.append(int(proc.name))
    return pids


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def lose_node(lab: SlurmLab, node: str) -> list[int]:
    """The node is gone: its job processes frozen, its slurmd killed, then they are; the pids ended."""
    frozen: list[int] = []
    for _ in range(3):  # a process may have started one more between the scan and the stop
        fresh = [p for p in node_job_processes(lab, node) if p not in frozen]
        if not fresh:
            break
        _signal(fresh, signal.SIGSTOP)
        frozen += fresh
    lab.kill_node(node)
    _signal(frozen, signal.SIGKILL)
    return frozen
