"""`python -m sim.sshhosts --site SITE --run-dir DIR [--faults FILE]`: serve every host of the site over SSH.

The hosts' `ib_write_bw` runs over the site's simulated fabric: the one `$BRINGUP_IB_DIAGS` or the state
file announced beside the site names, with the link faults of `fabric-faults.yml` beside the site (or
`--fabric-faults`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from fabric.diags import DIAGS_ENV
from provision.errors import BringupError
from provision.site import load_site
from provision.site.model import Role
from sim.site_paths import ibsim_state
from sim.sshhosts.addresses import DEFAULT_PORT
from sim.sshhosts.faults import load_faults
from sim.sshhosts.linkfaults import FILE_NAME, load_link_faults
from sim.sshhosts.perftest_sim import Traffic
from sim.sshhosts.server import Files, SshHostsServer, plan_hosts, quiet_asyncssh


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.sshhosts", description=__doc__)
    p.add_argument("--site", required=True, type=Path)
    p.add_argument("--run-dir", required=True, type=Path, help="where keys, known_hosts and the address map go")
    p.add_argument("--faults", required=True, type=Path, help="faults file (see sim/sshhosts/faults.py)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--first-index", type=int, default=0, help="offset into 127.0.32.0/20 (to run two labs)")
    p.add_argument("--agent-mode", choices=("fork", "spawn"), default="fork",
                   help="fork: the agent's main() in a child of a preloaded process; spawn: python3 -m tools.health")
    p.add_argument("--fabric-faults", type=Path, help=f"link faults (default: {FILE_NAME} beside the site)")
    p.add_argument("--all-roles", action="store_true", help="serve every host, not only GPU hosts")
    return p


async def _serve(server: SshHostsServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    print(f"serving {len(server.hosts)} simulated SSH hosts", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet_asyncssh()
    try:
        site = load_site(args.site)
        faults = load_faults(args.faults)
        link_faults = load_link_faults(args.fabric_faults or site.directory / FILE_NAME)
    except BringupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    names = [h.hostname for h in site.hosts() if args.all_roles or h.role is Role.gpu]
    files = Files(args.run_dir / "sshhosts")
    hosts = plan_hosts(names, faults, files, args.port, args.first_index)
    state = os.environ.get(DIAGS_ENV)
    traffic = Traffic(Path(state) if state else ibsim_state(site.paths), site.fabric_design, link_faults)
    asyncio.run(_serve(SshHostsServer(hosts, files, faults, agent_mode=args.agent_mode, traffic=traffic)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
