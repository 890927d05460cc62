"""Benchmark: `provision bisect` over N simulated SSH hosts, the job really launched on every sub-group.

    .venv/bin/python bench/bisect_ssh.py [--hosts 512] [--bad 1,2]

The job is `python3 -m sim.sshhosts.job --hosts {hosts}` (a simulated all-reduce that fails when a bad
host takes part), run over SSH on each sub-group's first host; every round's jobs run at once. Prints
job runs, rounds and wall time for the adaptive planner and Imbue's grid, and whether the culprits
found are exactly the bad hosts.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from provision.bisect.job_runs import bisect  # noqa: E402
from provision.site import load_site  # noqa: E402
from provision.ssh import SshSettings  # noqa: E402
from sim.sshhosts.harness import REPLAY_ROOT, SshLab, replayed_machine  # noqa: E402
from sim.sshhosts.sitegen import write_site  # noqa: E402

JOB = "python3 -m sim.sshhosts.job --hosts {hosts}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--bad", default="1,2", help="numbers of bad hosts to try, comma-separated")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = random.Random(args.seed)
    names = [f"gpu-{i:04d}" for i in range(1, args.hosts + 1)]
    print(f"{'hosts':>5} {'bad':>3}  {'planner':<10} {'runs':>4} {'rounds':>6} {'wall s':>6}  found")
    for d in (int(x) for x in args.bad.split(",")):
        bad = sorted(rng.sample(names, d))
        with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
            root = Path(tmp)
            class_spec, _ = replayed_machine()
            site_file = write_site(root, args.hosts, class_spec=class_spec, host_class="h200x2", name="bench")
            faults = root / "health-faults.yml"
            faults.write_text(yaml.safe_dump({"fixture_root": str(REPLAY_ROOT), "default_fixture": "h200x2-ib-healthy",
                                              "hosts": {h: {"job": "fail"} for h in bad}}))
            site = load_site(site_file)
            with SshLab(site_file, faults, root / "lab") as lab:
                settings = SshSettings.from_site(site, lab.env)
                for strategy in ("adaptive", "grid"):
                    t = time.monotonic()
                    report = bisect(names, JOB, settings, strategy=strategy, timeout_s=120)
                    wall = time.monotonic() - t
                    found = list(report.finding.culprits)
                    verdict = "exact" if found == bad else f"WRONG {found} vs {bad}"
                    print(f"{args.hosts:>5} {d:>3}  {strategy:<10} {report.finding.runs:>4} {report.finding.rounds:>6} "
                          f"{wall:>6.1f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
