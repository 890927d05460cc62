"""Benchmark the burn-in runner's overhead: one stage on N simulated SSH endpoints, launched and collected.

    .venv/bin/python bench/burnin_runner_bench.py                 # 512 hosts x 1 HCA, 5 s stage
    .venv/bin/python bench/burnin_runner_bench.py --hosts 128 --duration 3

A 2-tier fat tree for N single-HCA hosts (`fabric design generate`) runs in ibsim, routed by the real
`opensm -R ftree`; every host is an SSH endpoint of sim/sshhosts whose ib_write_bw runs over that fabric.
The plan comes from the live LFTs (`fabric burnin plan --site`'s code); its first stage runs through the
runner exactly as `fabric burnin run` does (counters before and after through perfquery, servers, grace,
clients, cleanup on every host). Printed: flows, measured, wall time, and the overhead beyond the duration.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from fabric.burnin.actions import gpu_pairing, plan_site
    from fabric.burnin.fabric_io import IbTools
    from fabric.burnin.history import History
    from fabric.burnin.stage_run import RunOptions, run_plan, ssh_remote
    from fabric.design import load_design
    from provision.site import load_site
    from provision.ssh import SshSettings
    from provision.state import StateStore
    from sim.fdlimit import raise_fd_limit
    from sim.ibfabric import IbFabric
    from sim.ibfabric.routing import route
    from sim.sshhosts.harness import REPLAY_ROOT, SshLab, replayed_machine
    from sim.sshhosts.sitegen import write_site

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--concurrency", type=int, default=128)
    args = p.parse_args()
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="bench-burnin-") as tmp:
        root = Path(tmp)
        subprocess.run([str(Path(sys.executable).parent / "fabric"), "design", "generate", "--hosts", str(args.hosts),
                        "--hcas", "1", "--radix", "64", "--tiers", "2", "--hosts-per-rack", "32",
                        "--host-name", "gpu-{index:04d}", "--name", "bench", "--out", str(root / "design.yml")],
                       check=True, capture_output=True)
        class_spec, _overlay = replayed_machine()
        class_spec["ib"]["hca_count"] = 1
        site_file = write_site(root, args.hosts, class_spec=class_spec, host_class="h200x1", name="bench")
        doc = yaml.safe_load(site_file.read_text())
        site_file.write_text(yaml.safe_dump({**doc, "fabric": {"design": "design.yml"}}, sort_keys=False))
        faults = root / "health-faults.yml"
        faults.write_text(yaml.safe_dump({"fixture_root": str(REPLAY_ROOT), "default_fixture": "h200x2-ib-healthy"}))
        site = load_site(site_file)
        t0 = time.monotonic()
        with IbFabric(load_design(root / "design.yml"), state_file=site.paths.ib_diags, timeout_s=120) as fabric:
            route(fabric, "ftree")
            with SshLab(site_file, faults, root / "run", start_timeout_s=600) as lab:
                up = time.monotonic() - t0
                plan = plan_site(site_file, "live", None, None, all_hosts=True)
                one = {**plan, "stages": plan["stages"][:1]}
                tools = IbTools.for_site(site_file)
                settings = SshSettings.from_site(site, lab.env)
                history = History(StateStore(root / "state.db"))
                opts = RunOptions(duration_s=args.duration, concurrency=args.concurrency)
                start = time.monotonic()
                report = asyncio.run(run_plan(one, history, ssh_remote(settings), tools, gpu_pairing(site), opts))
                wall = time.monotonic() - start
        stage = report.stages[0]
        print(f"{args.hosts} SSH endpoints (lab up in {up:.1f} s): stage of {stage.flows} flows "
              f"({2 * stage.flows} sessions), {stage.ok} measured, {stage.unknown} unknown; wall {wall:.1f} s "
              f"for a {args.duration} s stage: overhead {wall - args.duration:.1f} s "
              f"(servers-to-clients grace {opts.start_grace_s:g} s included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
