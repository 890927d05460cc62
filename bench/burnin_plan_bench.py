"""Benchmark the burn-in planner on real opensm tables: stages vs lower bound, planning time, peak RSS.

    .venv/bin/python bench/burnin_plan_bench.py              # embedded site + Imbue-size design, ftree and updn
    .venv/bin/python bench/burnin_plan_bench.py sim-site     # one fabric

Each fabric runs in ibsim; the real `opensm -o -R <engine>` programs it and `dump_lfts` reads the
tables back (those steps are timed and printed too). Planning (parse ibnetdiscover + parse the LFT
dump + routes + plan + recomputed per-stage loads) runs in a fresh child process per case, so its peak
RSS is its own. Side by side, in the same child: a planner in the style Imbue describes
(bench/burnin_imbue_style.py: flows over all shortest paths, a link burned at modelled load >= 0.5), its
stage count, and how many routed links it really burns at full rate under the same real tables (ours too).
The embedded site plans for its 16 GPU hosts (the controller's HCA left out, as the
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

    from bench.burnin_imbue_style import ImbuePlan, imbue_plan, real_burn
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
    rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    t0 = time.monotonic()
    imbue = imbue_plan(routing)
    full, planned, at_rate = real_burn(routing, imbue)
    ours_full, _p, _a = real_burn(routing, ImbuePlan(tuple(tuple((f.src, f.dst) for f in st) for st in plan.stages),
                                                     frozenset()))
    imbue_s = time.monotonic() - t0
    print(json.dumps({"stages": len(plan.stages), "lower_bound": plan.lower_bound, "hcas": len(routing.hcas),
                      "routed": len(plan.routed), "not_routed": len(plan.not_routed),
                      "uncovered": len(plan.uncovered), "max_load": max(max(r) for r in loads.values()),
                      "flows_per_stage": [len(s) for s in plan.stages], "plan_s": round(took, 2),
                      "peak_rss_mb": rss, "ours_full_rate_routed": len(ours_full & plan.routed),
                      "imbue_style": {"stages": len(imbue.stages), "modelled_burned": len(imbue.modelled_burned),
                                      "really_full_rate_routed": len(full & plan.routed), "flows": planned,
                                      "flows_at_full_rate": at_rate, "plan_s": round(imbue_s, 1)}}))


def main() -> int:
    from fabric.design import load_design
    from sim.ibfabric import IbFabric
    from sim.ibfabric.routing import dump_lfts, route
    with tempfile.TemporaryDirectory(prefix="burnin-bench-") as tmp:
        for name, (design_path, hosts) in FABRICS.items():
            if len(sys.argv) > 1 and name not in sys.argv[1:]:
                continue
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
                    imb = result["imbue_style"]
                    print(f"{name:10s} {engine:5s} opensm {t1 - t0:5.1f} s  dump_lfts {t2 - t1:5.1f} s  "
                          f"stages {result['stages']} (lower bound {result['lower_bound']}), full rate "
                          f"{result['ours_full_rate_routed']}/{result['routed']} routed; Imbue-style {imb['stages']} "
                          f"stages, {imb['really_full_rate_routed']}/{result['routed']} at full rate  "
                          f"plan {result['plan_s']} s  peak RSS {result['peak_rss_mb']} MB  {json.dumps(result)}",
                          flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], sys.argv[4] or None)
        sys.exit(0)
    sys.exit(main())
