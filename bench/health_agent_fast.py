"""Time the health agent's fast level on this host (or on a replay directory) and print the figures.

    python3 bench/health_agent_fast.py --config tests/fixtures/h200/config-h200x2.json [--runs 5] [--replay DIR]

The issue's target: under 5 s for the fast level on one host. Each run is a fresh interpreter, as when the
controller starts the agent over SSH.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--replay", type=Path)
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "tools.health", "--config", str(args.config), "--level", "fast", "--json"]
    if args.replay:
        cmd += ["--replay", str(args.replay)]
    walls, inner, codes = [], [], set()
    for _ in range(args.runs):
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
        walls.append(time.monotonic() - t0)
        codes.add(proc.returncode)
        inner.append(json.loads(proc.stdout)["duration_s"])
    print(f"health agent fast level, {args.runs} runs{' (replay)' if args.replay else ''}: "
          f"wall median {statistics.median(walls):.3f} s, max {max(walls):.3f} s; "
          f"checks alone median {statistics.median(inner):.3f} s; exit codes {sorted(codes)}; target < 5 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
