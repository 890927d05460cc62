"""How fast `provision status --json` answers on the Imbue-scale site (511 hosts).

Goal (issue 2): under 0.5 s wall for the whole command, as a user runs it (a fresh process).
The state store is populated first with a realistic history: every host walked to `deployed`,
~10% failed along the way.

    .venv/bin/python bench/status_bench.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from provision.site import load_site  # noqa: E402
from provision.state import Change, State, StateStore  # noqa: E402
from provision.state.lifecycle import FLOW  # noqa: E402


def populate(db: Path) -> int:
    site = load_site(REPO / "inventory" / "examples" / "imbue-scale.yml")
    store = StateStore(db)
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    changes: list[Change] = []
    for i, host in enumerate(site.hosts()):
        for state in FLOW[1 : FLOW.index(State.deployed) + 1]:
            changes.append(Change(host.hostname, state, "bench", evidence={"pad": "x" * 200}))
        if i % 10 == 3:
            changes.append(Change(host.hostname, State.failed, "bench", reason="pcie_width_x4"))
    store.transition_many(changes)
    n = store.event_count()
    store.close()
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    exe = Path(sys.executable).with_name("provision")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "imbue.db"
        events = populate(db)
        site = REPO / "inventory" / "examples" / "imbue-scale.yml"
        cmd = [str(exe), "status", "--json", "--site", str(site), "--db", str(db)]
        subprocess.run(cmd, check=True, capture_output=True)  # warm the page cache
        times, cpu = [], []
        for _ in range(args.runs):
            before = os.times()
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
            after = os.times()
            cpu.append(after.children_user + after.children_system - before.children_user - before.children_system)
        interp = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            interp.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"provision status --json, imbue-scale (511 hosts, {events} events), {args.runs} runs")
    print(f"  median {med * 1000:.0f} ms, min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
    print(f"  CPU time (user+sys) median {statistics.median(cpu) * 1000:.0f} ms: what wall time is on an idle machine")
    print(f"  load average while measuring: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  of which a bare interpreter start: {statistics.median(interp) * 1000:.0f} ms")
    print(f"  goal 500 ms: {'met' if med < 0.5 else 'NOT met'} (ratio {med / 0.5:.2f} of the budget)")
    shutil.rmtree(Path(tmp), ignore_errors=True)


if __name__ == "__main__":
    main()
