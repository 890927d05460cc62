"""`python -m sim.redfish --site FILE [...]`: serve every BMC of a site until SIGTERM.

The BMC passwords come from the environment variables the site's credentials name (never argv).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from provision.errors import BringupError
from provision.site import load_site
from sim.fdlimit import raise_fd_limit
from sim.redfish.bmc import Settings
from sim.redfish.faults import FaultFileError, load_faults
from sim.redfish.server import Simulator
from sim.redfish.tlscert import KEY_TYPES


def _address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host, int(port)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sim.redfish", description=__doc__)
    p.add_argument("--site", type=Path, required=True)
    p.add_argument("--cert-dir", type=Path, required=True, help="where the CA and the BMC certificate are written")
    p.add_argument("--faults", type=Path, help="YAML file mapping host names to fault names")
    p.add_argument("--control", type=_address, help="ADDRESS:PORT of the loopback control API")
    p.add_argument("--latency-ms", type=float, default=0.0, help="added to every BMC answer")
    p.add_argument("--slow-ms", type=float, default=2000.0, help="extra latency of BMCs with the 'slow' fault")
    p.add_argument("--power-delay-ms", type=float, default=1000.0, help="how long a power change takes")
    p.add_argument("--cert-key", choices=KEY_TYPES, default="ecdsa",
                   help="the BMC certificate's key: ECDSA P-256 (cheap handshakes) or RSA-2048 (as many iDRACs ship)")
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    site = load_site(args.site)
    raise_fd_limit()
    settings = Settings(latency_s=args.latency_ms / 1000, slow_s=args.slow_ms / 1000,
                        power_delay_s=args.power_delay_ms / 1000)
    sim = Simulator(site, settings, load_faults(args.faults), args.cert_dir, args.control, args.cert_key)
    await sim.start()
    faulty = {n: sorted(f.value for f in b.faults) for n, b in sim.bmcs.items() if b.faults}
    print(f"serving {len(sim.bmcs)} BMCs of site {site.name}; faults: {faulty or 'none'}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await sim.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        asyncio.run(run(args))
    except (BringupError, FaultFileError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
