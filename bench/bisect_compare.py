"""Benchmark: job runs and rounds to find 1 or 2 bad hosts among 48 and 512, adaptive planner vs Imbue's grid.

    .venv/bin/python bench/bisect_compare.py [--trials 500] [--seed 1]

Pure simulation of the planners (provision/bisect/planner.py) against a job that fails exactly when a
bad host takes part; bad hosts placed uniformly at random. A round is one set of job runs at the same
time (disjoint host groups); runs count machine time, rounds count wall time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from provision.bisect.planner import AdaptivePlanner, GridPlanner, Planner, simulate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    header = ("hosts", "bad", "planner", "runs mean", "max", "rounds mean", "max")
    print("{:>5} {:>3}  {:<22} {:>9} {:>4} {:>11} {:>4}  correct".format(*header))
    for n in (48, 512):
        hosts = [f"gpu-{i:04d}" for i in range(1, n + 1)]
        for d in (1, 2):
            makers: list[tuple[str, dict[str, int]]] = [("grid (Imbue)", {})]
            makers += [(f"adaptive, {r} rounds", {"target_rounds": r}) for r in (2, 3, 4, 6)]
            for label, kw in makers:
                rng = random.Random(args.seed)
                runs, rounds, ok = [], [], 0
                for _ in range(args.trials):
                    bad = rng.sample(hosts, d)
                    planner: Planner = GridPlanner(hosts) if not kw else AdaptivePlanner(hosts, **kw)
                    result = simulate(planner, bad)
                    runs.append(result.finding.runs)
                    rounds.append(result.finding.rounds)
                    ok += result.correct
                print(f"{n:>5} {d:>3}  {label:<22} {statistics.mean(runs):>9.1f} {max(runs):>4} "
                      f"{statistics.mean(rounds):>11.1f} {max(rounds):>4}  {ok}/{args.trials}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
