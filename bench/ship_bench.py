"""Ship a pack-env archive to N simulated SSH hosts (sim/sshhosts) as a tree and, in the same lab run, from
the controller to every host; print both wall times and how many copies the controller sent.

    flock /tmp/bringup-lab.lock .venv/bin/python bench/ship_bench.py --hosts 512 --payload-mb 1

On loopback the controller's uplink is not the bottleneck it is on a real site (every copy shares the
same two cores and the one simulator process), so the wall times here measure the fan-out's own cost;
the copies the controller sends are what scales with a real uplink."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from provision.ship.fanout import ShipConfig, Shipper
    from provision.ship.tree import plan_direct, plan_tree
    from provision.site import load_site
    from provision.ssh import SshSettings
    from sim.fdlimit import raise_fd_limit
    from sim.sshhosts.harness import SshLab
    from tests.ship.conftest import LAB_PUSH, lab_site, make_venv
    from training.pack_env import pack

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--payload-mb", type=float, default=1.0)
    p.add_argument("--seeds", type=int, default=2)
    args = p.parse_args()
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="bench-ship-") as tmp:
        root = Path(tmp)
        man = pack(make_venv(root, int(args.payload_mb * 2**20)), root / "env")
        archive = root / "env" / "bringup-env.tar.gz"
        site_file, faults = lab_site(root / "site", args.hosts)
        t0 = time.monotonic()
        with SshLab(site_file, faults, root / "lab", start_timeout_s=600) as lab:
            up = time.monotonic() - t0
            settings = SshSettings.from_site(load_site(site_file), lab.env)
            names = [f"gpu-{i:04d}" for i in range(1, args.hosts + 1)]
            out: dict[str, object] = {"hosts": args.hosts, "archive_bytes": man["archive_bytes"],
                                      "lab_up_s": round(up, 1)}
            for mode, rounds in (("tree", plan_tree(names, args.seeds)), ("direct", plan_direct(names))):
                cfg = ShipConfig(dest=str(root / mode / "{host}"), push=LAB_PUSH, encoding="base64")
                shipper = Shipper(settings, cfg, archive, man)
                start = time.monotonic()
                results = asyncio.run(shipper.run(rounds))
                out[mode] = {"wall_s": round(time.monotonic() - start, 1), "ok": sum(r.ok for r in results),
                             "rounds": len(rounds), "controller_copies": shipper.controller_copies,
                             "controller_bytes": shipper.controller_copies * len(shipper.payload),
                             "errors": sorted({r.error for r in results if not r.ok})[:3]}
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
