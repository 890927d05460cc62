"""Benchmark the burn-in planner on real opensm tables: stages vs lower bound, planning time, peak RSS.

    .venv/bin/python bench/burnin_plan_bench.py              # embedded site + Imbue-size design, ftree and updn

Each fabric runs in ibsim; the real `opensm -o -R <engine>` programs it and `dump_lfts` reads the
tables back (those steps are timed and printed too). Planning (parse ibnetdiscover + parse the LFT
dump + routes + plan + recomputed per-stage loads) runs in a fresh child process per case, so its peak
RSS is its own. The embedded site plans for its 16 GPU hosts (the controller's HCA left out, as the
site does); the Imbue-size design (320 switches, 4,088 HCAs) for every HCA.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FABRICS = {"sim-site": (REPO / "inventory/sim/fabric/design.yml", "gpu-*"),
           "imbue-size": (REPO / "inventory/examples/fabric/imbue-scale-design.yml", None)}


def _child(disc: str, lfts: str, hosts: str | None) -> None:
    import fnmatch

    from fabric.burnin.lft import parse_lfts
    from fabric.burnin.plan import make_plan, plan_loads
    from fabric.burnin.routes import build_routing
    from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
    d_text, l_text = Path(disc).read_text(), Path(lfts).read_text()
    start = time.monotonic()
    top = parse_ibnetdiscover(d_text)
    names = {n.description.split()[0] for n in top.nodes.values() if n.type != "switch" and n.description}
    chosen = None if hosts is None else {h for h in names if fnmatch.fnmatchcase(h, hosts)}
    routing = build_routing(top, parse_lfts(l_text), chosen)
    plan = make_plan(routing)
    loads = plan_loads(plan)
    took = time.monotonic() - start
    print(json.dumps({"stages": len(plan.stages), "lower_bound": plan.lower_bound, "hcas": len(routing.hcas),
                      "routed": len(plan.routed), "not_routed": len(plan.not_routed),
                      "uncovered": len(plan.uncovered), "max_load": max(max(r) for r in loads.values()),
                      "flows_per_stage": [len(s) for s in plan.stages], "plan_s": round(took, 2),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def main() -> int:
    from fabric.design import load_design
    from sim.ibfabric import IbFabric
    from sim.ibfabric.routing import dump_lfts, route
    with tempfile.TemporaryDirectory(prefix="burnin-bench-") as tmp:
        for name, (design_path, hosts) in FABRICS.items():
            with IbFabric(load_design(design_path), timeout_s=300) as fabric:
                disc = Path(tmp) / f"{name}.ibnetdiscover.txt"
                disc.write_text(fabric.discover())
                for engine in ("ftree", "updn"):
                    t0 = time.monotonic()
                    route(fabric, engine, timeout_s=600)
                    t1 = time.monotonic()
                    lfts = Path(tmp) / f"{name}.{engine}.lfts.txt"
                    lfts.write_text(dump_lfts(fabric, timeout_s=600))
                    t2 = time.monotonic()
                    out = subprocess.run([sys.executable, __file__, "--child", str(disc), str(lfts), hosts or ""],
                                         capture_output=True, text=True, check=True).stdout
                    result = json.loads(out)
                    print(f"{name:10s} {engine:5s} opensm {t1 - t0:5.1f} s  dump_lfts {t2 - t1:5.1f} s  "
                          f"stages {result['stages']} (lower bound {result['lower_bound']})  "
                          f"plan {result['plan_s']} s  peak RSS {result['peak_rss_mb']} MB  {json.dumps(result)}",
                          flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], sys.argv[4] or None)
        sys.exit(0)
    sys.exit(main())
