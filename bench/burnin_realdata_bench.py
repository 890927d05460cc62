"""Burn-in planning on real fabrics: stages vs the lower bound (and its witness), covered links, time, RSS.

    .venv/bin/python bench/burnin_realdata_bench.py                 # selene and dgx-h100, ftree and updn
    .venv/bin/python bench/burnin_realdata_bench.py selene ftree    # one fabric, one engine
    taskset -c 0,1 .venv/bin/python bench/burnin_realdata_bench.py  # on 2 cores, as the issue's goal says

The captures are ../shared/realdata/1_infiniband/'s (skipped, saying so, when absent): Selene, a 3-tier DGX
A100 SuperPOD (666 switches, 4,341 CAs), and a 2-tier DGX H100 SuperPOD. Each runs in ibsim and the real
`opensm -R <engine>` routes it (with ftree requested, opensm falls back to minhop on both: its log says so);
`dump_lfts` reads the tables back. Those steps are cached (tests/fabric/burnin/realfabrics.py). Each case
then plans in a fresh child process (its peak RSS its own): reading the files, parsing, `make_plan` and the
independent per-link load check (`plan_loads`), for the GPU hosts and for every HCA; side by side, in the
same child, the planner before issue #41 (one greedy stage after another, `plan._one_stage`) on the same
tables: its stages and time.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _greedy_before(routing: object) -> int:
    """Stages of the planner as it was before #41: greedy stage after stage on the route table."""
    from fabric.burnin.plan import _one_stage, own_links, route_table
    from fabric.burnin.routes import Routing, uplink_index
    assert isinstance(routing, Routing)
    table = route_table(routing)
    owns, up = own_links(table), uplink_index(routing)
    uncovered, stages = set(table.routed), 0
    while uncovered and stages < 64:
        stage = _one_stage(routing, table, owns, up, uncovered)
        if not stage:
            break
        for flow in stage:
            uncovered.difference_update(flow.links)
        stages += 1
    return stages


def child(disc: str, lfts: str, log: str, hosts: str, before: bool) -> dict[str, object]:
    import fnmatch

    from fabric.burnin.engine import parse_opensm_log
    from fabric.burnin.lft import parse_lfts
    from fabric.burnin.plan import make_plan, plan_loads
    from fabric.burnin.routes import build_routing
    from fabric.identify import ca_name_from_description
    from fabric.parsers.ibnetdiscover import parse_ibnetdiscover
    from fabric.topology import NodeType
    start = time.monotonic()
    top = parse_ibnetdiscover(Path(disc).read_text())
    dump = parse_lfts(Path(lfts).read_bytes(), lfts)
    read = time.monotonic()
    chosen = None
    if hosts != "all":
        labels = {lb.split("/", 1)[0] for n in top.nodes.values()
                  if n.type is not NodeType.SWITCH and (lb := ca_name_from_description(n.description))}
        chosen = {h for h in labels if fnmatch.fnmatchcase(h, hosts)}
    routing = build_routing(top, dump, chosen)
    plan = make_plan(routing)
    loads = plan_loads(plan)
    took = time.monotonic() - start
    w = plan.witness
    out: dict[str, object] = {
        "hcas": len(routing.hcas), "stages": len(plan.stages), "lower_bound": plan.lower_bound,
        "witness": {"kind": w.kind, "links": len(w.links), "hcas": len(w.hcas)} if w else None,
        "bound_reason": plan.bound_reason, "forced": len(plan.forced), "routed": len(plan.routed),
        "covered": sum(1 for row in loads.values() if max(row) == 1), "max_load": max(max(r) for r in loads.values()),
        "engine": parse_opensm_log(Path(log).read_text()).to_dict() if log else None,
        "read_parse_s": round(read - start, 2), "plan_s": round(took, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    if before:
        t0 = time.monotonic()
        out["before_41"] = {"stages": _greedy_before(routing), "plan_s": round(time.monotonic() - t0, 2)}
    return out


def main(argv: list[str]) -> int:
    from tests.fabric.burnin.realfabrics import CAPTURES, capture_path, routed
    names = [a for a in argv if a in CAPTURES] or list(CAPTURES)
    engines = [a for a in argv if a in ("ftree", "updn")] or ["ftree", "updn"]
    for name in names:
        if capture_path(name) is None:
            print(f"{name}: capture {CAPTURES[name][0]} not present (../shared/realdata not checked out): skipped")
            continue
        for engine in engines:
            got = routed(name, engine)
            assert got is not None
            for hosts in (got.gpu_hosts, "all"):
                out = subprocess.run([sys.executable, __file__, "--child", str(got.discovered), str(got.lfts),
                                      str(got.opensm_log), hosts], capture_output=True, text=True, check=True).stdout
                r = json.loads(out)
                used = (r["engine"] or {}).get("used")
                before = r.get("before_41") or {}
                print(f"{name:8s} -R {engine:5s} (tables: {used}) {hosts:8s} {r['hcas']:5d} HCAs: "
                      f"{r['stages']} stages, "
                      f"lower bound {r['lower_bound']} ({r['witness']}), {r['covered']}/{r['routed']} routed links "
                      f"burned, plan {r['plan_s']} s (read+parse {r['read_parse_s']} s), peak RSS {r['peak_rss_mb']} MB"
                      f"; before #41: {before.get('stages')} stages in {before.get('plan_s')} s", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], "--no-before" not in sys.argv)))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
