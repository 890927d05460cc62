"""`python -m sim.testhosts up [--count N] [--run-dir D] | down [--run-dir D] | status [--run-dir D]`.

`serve [--count N] [--run-dir D]` is `up` that stays in the foreground until SIGTERM, then `down`: the
process `python -m sim up --with testhosts` runs and `python -m sim down` stops.

`site-serve --site S --faults F --perftest ADDRESS:PORT [--run-dir D]` is the same for every GPU host of a
site (sim/testhosts/site_lab.py): what `python -m sim up` runs for a site with a health-faults file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from provision.errors import BringupError
from sim.testhosts import lab as lab_mod
from sim.testhosts import site_lab

DEFAULT_RUN_DIR = lab_mod.REPO_ROOT / "state" / "testhosts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.testhosts", description=__doc__)
    parser.add_argument("command", choices=("up", "down", "status", "serve", "site-serve"))
    parser.add_argument("--count", type=int, default=4, help="test hosts to start (up)")
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="where this run lives")
    parser.add_argument("--site", type=Path, help="site-serve: the site whose GPU hosts to start")
    parser.add_argument("--faults", type=Path, help="site-serve: its health-faults file")
    parser.add_argument("--perftest", default="", help="site-serve: the perftest simulator's ADDRESS:PORT")
    args = parser.parse_args(argv)
    try:
        if args.command == "site-serve":
            if args.site is None or args.faults is None:
                parser.error("site-serve needs --site and --faults")
            run_dir, site, faults, perftest = args.run_dir, args.site, args.faults, args.perftest
            return lab_mod.supervise(run_dir, lambda: site_lab.up(run_dir, site, faults, perftest))
        if args.command == "serve":
            return lab_mod.serve(args.run_dir, args.count)
        if args.command == "up":
            lab = lab_mod.up(args.run_dir, args.count, detached=True)  # until `down`
            for host in lab.hosts:
                print(f"{host.name:<12} {host.address}")
            print(f"inventory: {lab.inventory}")
            print(f"run: ansible-playbook -i {lab.inventory} playbooks/site.yml")
        elif args.command == "down":
            problems = lab_mod.down(args.run_dir)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
        else:
            state = args.run_dir.resolve() / lab_mod.STATE_FILE
            print(state.read_text() if state.exists() else json.dumps({"hosts": []}))
    except BringupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
