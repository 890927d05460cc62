"""`python -m sim.slurm serve --site S --run-dir D`: the lab's Slurm for a site, until SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from provision.site import load_site
from sim.slurm.lab import SlurmLab
from sim.slurm.service import READY, spec_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.slurm")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the site's Slurm until SIGTERM")
    serve.add_argument("--site", required=True, type=Path)
    serve.add_argument("--run-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    lab = SlurmLab(args.run_dir, spec_for(load_site(args.site)))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ready = args.run_dir / READY
    ready.unlink(missing_ok=True)
    with lab.running():
        ready.write_text("up\n")
        print(f"slurm: slurmctld and {len(lab.spec.nodes)} slurmd up; SLURM_CONF={lab.conf}", flush=True)
        stop.wait()
        ready.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
