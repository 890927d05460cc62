"""Counter sweeps of the Imbue-size fabric in ibsim through the real `perfquery`, and the planner's share.

    .venv/bin/python bench/ports_sweep_bench.py [--design inventory/examples/fabric/imbue-scale-design.yml]

The fabric (320 switches, 4,088 HCAs) runs in ibsim; the real OpenSM assigns its LIDs (`opensm -o`, as a
subnet manager would), then two sweeps read every switch port's error counters as `fabric ports apply
--sweep` does (`perfquery -l <lid> 255`, one switch after another), with symbol errors injected on a
few ports between them through ibsim's console. The planner then turns the two sweeps into its plan.
Prints the sweep time, the planning time and the planner's share of the whole (goal: under 10%).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from fabric.design import load_design
    from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
    from fabric.ports.actuate import lids_from_ibnetdiscover
    from fabric.ports.counters import CounterSweep, parse_perfquery
    from fabric.ports.plan import plan_ports
    from fabric.topology import End, NodeType
    from provision.site.port_policy import PortPolicy
    from sim.ibfabric import IbFabric
    from sim.ibfabric.routing import route

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--design", type=Path, default=REPO / "inventory/examples/fabric/imbue-scale-design.yml")
    p.add_argument("--faulty", type=int, default=12, help="switch ports given symbol errors between the sweeps")
    args = p.parse_args()

    with IbFabric(load_design(args.design), timeout_s=300) as fabric:
        t0 = time.monotonic()
        route(fabric, "ftree", timeout_s=600)
        text = fabric.discover()
        top = parse_ibnetdiscover(text)
        lids = {g: lid for g, lid in lids_from_ibnetdiscover(text).items()
                if g in top.nodes and top.nodes[g].type is NodeType.SWITCH}
        setup_s = time.monotonic() - t0

        def sweep(name: str) -> tuple[CounterSweep, float]:
            started, taken = time.monotonic(), datetime.now(UTC)
            values: dict[End, dict[str, int]] = {}
            for guid, lid in sorted(lids.items()):
                swept = parse_perfquery(fabric.tool(["perfquery", "-l", str(lid), "255"]), name)
                values.update({End(guid, e.port): dict(v) for e, v in swept.values.items() if e.port > 0})
            return CounterSweep(name, taken, values, by_lid=False, complete=True), time.monotonic() - started

        first, first_s = sweep("sweep 1")
        faulty = [link.a for link in top.links if top.nodes[link.a.guid].type is NodeType.SWITCH][:args.faulty]
        for end in faulty:  # ibsim names a switch "S-<guid>"
            fabric.console(f'PerformanceSet "S-{end.guid}"[{end.port}] PortCounters.SymbolErrorCounter=5000')
        second, second_s = sweep("sweep 2")
        # Rates are per hour: the second sweep is stamped an hour later, as a sweep taken by a nightly job.
        second = CounterSweep(second.source, (first.taken_at or datetime.now(UTC)) + timedelta(hours=1),
                              second.values, by_lid=False, complete=True)
        t1 = time.monotonic()
        plan = plan_ports(top, [], [first, second], (), PortPolicy(), datetime.now(UTC) + timedelta(hours=1))
        plan_s = time.monotonic() - t1

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    total = first_s + second_s + plan_s
    print(f"fabric: {len(lids)} switches, {sum(1 for n in top.nodes.values() if n.type is NodeType.CA)} HCAs, "
          f"{len(top.links)} links (ibsim + opensm -o: {setup_s:.1f} s)")
    print(f"sweep 1: {len(first.values)} ports in {first_s:.1f} s; sweep 2: {len(second.values)} ports in "
          f"{second_s:.1f} s (perfquery -l <lid> 255 per switch, through ibsim)")
    print(f"plan from the two sweeps: {plan_s:.2f} s, {len(plan.disable)} link(s) to disable "
          f"({args.faulty} ports given symbol errors); planner share {100 * plan_s / total:.1f}% of sweeps + plan "
          f"(goal < 10%); peak RSS {rss} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
