"""A simulated multi-host job for `provision bisect`: `python -m sim.sshhosts.job --hosts a,b,c`.

Like an NCCL all-reduce across the listed hosts, it fails (exit 1, naming no culprit, as real jobs
do not) when any of them has `job: fail` in the lab's faults file, and hangs when one has `job: hang`.
The faults file comes from `$BRINGUP_SIM_FAULTS`, which every simulated host sets for its commands.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sim.sshhosts.faults import JobFault, load_faults


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.sshhosts.job")
    p.add_argument("--hosts", required=True, help="comma-separated host names taking part")
    args = p.parse_args(argv)
    hosts = [h for h in args.hosts.split(",") if h]
    faults = load_faults(Path(os.environ["BRINGUP_SIM_FAULTS"]))
    kinds = {faults.for_host(h).job for h in hosts}
    print(f"all-reduce over {len(hosts)} hosts (launched on {os.environ.get('BRINGUP_SIM_HOST', '?')})")
    if JobFault.hang in kinds:
        time.sleep(3600)
    if JobFault.fail in kinds:
        print("NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129", file=sys.stderr)
        print("RuntimeError: NCCL communicator was aborted", file=sys.stderr)
        return 1
    print("busbw 180.2 GB/s: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
