"""Program the simulated fabric's forwarding tables with the real `opensm`, and read them back.

`route(fabric, engine)` runs `opensm -o -R <engine>` (run once, then exit) through the lab's tool prefix against a
running `IbFabric`; `dump_lfts`, `ibroute` and `ibtracert` then read what it programmed into the
simulated switches, with the same tools one runs on a real fabric.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sim.ibfabric.diags_prefix import run_sim_tool, sim_env
from sim.ibfabric.harness import IbFabric, IbsimError

ENGINES = ("ftree", "updn", "minhop")


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise IbsimError(f"routing engine {engine!r}: expected one of {', '.join(ENGINES)}")


def _opensm(env: dict[str, str], engine: str, log: Path, timeout_s: float) -> str:
    """`opensm -o -R <engine>` on the simulated fabric: route once, then exit; its output."""
    argv = ["opensm", "-o", "-R", engine, "-f", str(log)]
    try:
        proc = run_sim_tool(argv, env, timeout_s)
    except subprocess.TimeoutExpired:
        raise IbsimError(f"opensm -R {engine} did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0 or "Exiting SM" not in proc.stdout:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        raise IbsimError(f"opensm -R {engine} failed (rc {proc.returncode}): {tail[0]}")
    return proc.stdout


def route(fabric: IbFabric, engine: str = "ftree", timeout_s: float = 120.0) -> str:
    """Run the real OpenSM once with routing engine `engine`; returns its output."""
    _check_engine(engine)
    return _opensm(fabric.env(), engine, fabric.workdir / "opensm.log", timeout_s)


def dump_lfts(fabric: IbFabric, timeout_s: float = 120.0) -> str:
    """Every switch's unicast LFT (Debian's `dump_lfts`, dump_lfts.sh upstream)."""
    try:
        proc = run_sim_tool(["dump_lfts"], fabric.env(), timeout_s)
    except subprocess.TimeoutExpired:
        raise IbsimError(f"dump_lfts did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise IbsimError(f"dump_lfts failed (rc {proc.returncode})")
    return proc.stdout


def ibroute(fabric: IbFabric, lids: list[int]) -> str:
    """`ibroute <lid>` of each switch LID, concatenated (the other form `--routing` accepts)."""
    return "".join(fabric.tool(["ibroute", str(lid)]) for lid in lids)


def ibtracert(fabric: IbFabric, src_lid: int, dst_lid: int) -> str:
    return fabric.tool(["ibtracert", str(src_lid), str(dst_lid)])


def route_state(state_file: Path, engine: str = "ftree", timeout_s: float = 120.0) -> str:
    """Run the real OpenSM once on the fabric a state file announces (the lab's, `sim.site_paths.ibsim_state`),
    as the subnet manager of a real fabric would have: afterwards `dump_lfts` reads its tables."""
    _check_engine(engine)
    try:
        state = json.loads(state_file.read_text())
        env = sim_env(str(state["socket"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IbsimError(f"simulated fabric state {state_file} is unreadable: {e}") from None
    with tempfile.TemporaryDirectory(prefix="opensm-") as tmp:
        return _opensm(env, engine, Path(tmp) / "opensm.log", timeout_s)


def main(argv: list[str] | None = None) -> int:
    """`python -m sim.ibfabric.routing --state-file F [--engine ftree]`: route a running simulated fabric."""
    parser = argparse.ArgumentParser(prog="python -m sim.ibfabric.routing")
    parser.add_argument("--state-file", type=Path, required=True)
    parser.add_argument("--engine", choices=ENGINES, default="ftree")
    args = parser.parse_args(argv)
    try:
        route_state(args.state_file, args.engine)
    except IbsimError as e:
        sys.stderr.write(f"routing: error: {e}\n")
        return 1
    sys.stdout.write(f"routed with opensm -R {args.engine}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
