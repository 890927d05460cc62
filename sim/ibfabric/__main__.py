"""`python -m sim.ibfabric serve --design FILE --run-dir DIR [--state-file F]`: keep the simulated fabric up
until SIGTERM.

The lab (`python -m sim up`) runs this as the fabric's service; it writes the state file (default
`<run-dir>/ibfabric.json`; the lab names the one beside the site file, `sim.site_paths.ibsim_state`), which
is also the announcement of the fabric's tools that `fabric validate --live` reads (`fabric/diags.py`),
there or through $BRINGUP_IB_DIAGS.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from fabric.design import load_design
from fabric.errors import FabricError
from sim.ibfabric.harness import IbFabric, IbsimError
from sim.sshhosts.linkfaults import LinkFaultsError, apply_widths, load_link_faults

STATE_NAME = "ibfabric.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.ibfabric")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="run the design in ibsim until SIGTERM/SIGINT")
    serve.add_argument("--design", type=Path, required=True)
    serve.add_argument("--run-dir", type=Path, required=True)
    serve.add_argument("--state-file", type=Path,
                       help=f"where to announce the fabric (default: <run-dir>/{STATE_NAME})")
    serve.add_argument("--switch-descriptions", choices=("factory", "location"), default="factory")
    serve.add_argument("--link-faults", type=Path, help="links that train narrower (sim/sshhosts/linkfaults.py)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        design = load_design(args.design)
        args.run_dir.mkdir(parents=True, exist_ok=True)
        widths = load_link_faults(args.link_faults)
        fabric = IbFabric(design, lambda built: apply_widths(built, widths),
                          switch_descriptions=args.switch_descriptions, workdir=args.run_dir,
                          state_file=args.state_file or args.run_dir / STATE_NAME)
        with fabric:
            sys.stdout.write(f"ibfabric: {len(fabric.asbuilt.nodes)} nodes up, ibsim pid {fabric.pid}, "
                             f"socket {fabric.socket}\n")
            sys.stdout.flush()
            while not stop.wait(1.0):
                if not fabric.healthy():
                    sys.stderr.write("ibfabric: ibsim stopped answering\n")
                    return 1
    except (FabricError, IbsimError, LinkFaultsError) as e:
        sys.stderr.write(f"ibfabric: error: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
