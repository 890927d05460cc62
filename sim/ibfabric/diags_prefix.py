"""How the lab's tools reach its simulated fabric, as a site's tools do (`fabric/diags.py`): through the
prefix `run-diags` (beside this file: ibsim-run, the simulator's notices dropped), with the simulator's
socket in the environment and one attachment point per HCA of the as-built fabric (`SIM_HOST`)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from fabric.diags import Diags
from fabric.toolrun import max_output_of, run_tool

RUN_DIAGS = Path(__file__).with_name("run-diags")


def sim_env(socket: str, sim_host: str | None = None) -> dict[str, str]:
    """What a tool needs to reach the simulator on `socket`, attached at node `sim_host` (default: the first)."""
    return {"IBSIM_SOCKNAME": socket, **({"SIM_HOST": sim_host} if sim_host else {})}


def run_sim_tool(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """One infiniband-diags (or opensm) run on the simulated fabric, through the one runner (`fabric.toolrun`)."""
    return run_tool([str(RUN_DIAGS), *argv], env, timeout_s, max_output_of(argv[0]), argv[0])


def sim_diags(socket: str, sim_host: str | None = None) -> Diags:
    """The simulator's tools as the product reaches a site's (what the announcement of `IbFabric` says)."""
    return Diags(prefix=(str(RUN_DIAGS),), env=sim_env(socket, sim_host))
