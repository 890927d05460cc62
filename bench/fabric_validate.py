"""Benchmark `fabric validate`: parse + identify + validate at Selene and Imbue scale; time and peak RSS.

    .venv/bin/python bench/fabric_validate.py            # all scenarios, each in a fresh process
    .venv/bin/python bench/fabric_validate.py --ibsim    # also time ibnetdiscover on an Imbue-size ibsim fabric

Scenarios (the capture text is read before the clock starts; peak RSS is the whole process's):
  selene-baseline  Selene compute capture (666 switches, 4,341 CAs, 12,852 links, 2.8 MB) validated
                   against itself as a baseline (`fabric validate --baseline`); the baseline design is
                   built from the capture inside the timed part.
  selene-faults    the same with 3 cables swapped/unplugged in today's capture (findings expected).
  imbue-design     the Imbue-scale design (320 switches, 4,088 HCAs, 12,280 links) loaded from
                   inventory/examples/fabric, and a synthetic ibnetdiscover capture of it (out-of-the-box
                   switch descriptions, so every switch is placed from its neighbours) with 4 faults;
                   timed: design load + parse + identify + validate.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SELENE = (REPO / ".." / "shared" / "realdata" / "1_infiniband"
          / "ibnetdiscover__Mellanox-ufm_sdk_3.0__topo_selene.compute.txt")
IMBUE = REPO / "inventory" / "examples" / "fabric" / "imbue-scale-design.yml"


def _selene_faults(text: str) -> str:
    """Today's capture with faults, edited as the fabric would show them: HCA selene-slurm-02 mlx5_1 gone
    (its CA block and the leaf's port line), and two leaf host ports crossed (both ends of both links)."""
    gone = "1c34da03006088a8"
    lines = [ln for ln in text.splitlines() if f'"H-{gone}"' not in ln and f"caguid=0x{gone.lstrip('0')}" not in ln
             and not ln.startswith(f"[1]({gone})")]
    out = "\n".join(lines) + "\n"
    # MLG01-01 ports 2 and 3 host selene-ufm-c-02 / -01 HCA-2: cross them on both sides
    out = out.replace('[2]\t"H-1c34da0300608860"[1]', '[3]\t"H-1c34da0300608860"[1]', 1)
    out = out.replace('[3]\t"H-1c34da0300608808"[1]', '[2]\t"H-1c34da0300608808"[1]', 1)
    out = out.replace('"S-1c34da0300728966"[2]\t\t# lid 469', '"S-1c34da0300728966"[3]\t\t# lid 469', 1)
    out = out.replace('"S-1c34da0300728966"[3]\t\t# lid 262', '"S-1c34da0300728966"[2]\t\t# lid 262', 1)
    return out


def scenario(name: str) -> dict[str, object]:
    from fabric.baseline import design_from_topology
    from fabric.design import Port, load_design
    from fabric.pipeline import run, topology_from_texts
    from sim.asbuilt import AsBuilt

    if name.startswith("selene"):
        text = SELENE.read_text()
        today = _selene_faults(text) if name == "selene-faults" else text
        c0, t0 = time.process_time(), time.perf_counter()
        design = design_from_topology(topology_from_texts([("baseline", text)]), "selene")
        t1 = time.perf_counter()
        result = run(design, topology_from_texts([("today", today)]))
        t2, c2 = time.perf_counter(), time.process_time()
        timings = {"baseline_design_s": round(t1 - t0, 3), "parse_identify_validate_s": round(t2 - t1, 3)}
    else:
        design0 = load_design(IMBUE)
        ab = AsBuilt.from_design(design0)
        leaves = [s.name for s in design0.switches() if s.tier == 1]
        spines = [s.name for s in design0.switches() if s.tier == 2]
        ab.swap(Port(leaves[0], 1), Port(leaves[0], 2))
        ab.unplug(Port(leaves[5], 40))
        ab.degrade(Port(spines[3], 50), width="1X")
        ab.remove_node("gpu-10-03/mlx5_4")
        text = ab.render()
        c0, t0 = time.process_time(), time.perf_counter()
        design = load_design(IMBUE)
        t1 = time.perf_counter()
        result = run(design, topology_from_texts([("imbue", text)]))
        t2, c2 = time.perf_counter(), time.process_time()
        timings = {"design_load_s": round(t1 - t0, 3), "parse_identify_validate_s": round(t2 - t1, 3)}
    return {
        "scenario": name,
        **timings,
        "total_s": round(t2 - t0, 3),
        "total_cpu_s": round(c2 - c0, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "switches": result.report.summary["switches"],
        "links": result.report.summary["links"],
        "findings": {k: v for k, v in result.report.summary["findings"].items() if v},  # type: ignore[union-attr]
        "capture_mb": round(len(text) / 1e6, 2),
    }


def ibsim_discovery() -> dict[str, object]:
    from fabric.design import build_design, load_design
    from fabric.pipeline import run, topology_from_texts
    from sim.ibfabric import IbFabric

    ndr = load_design(IMBUE)  # Debian's ibsim 0.10 has no NDR: run the same cabling at HDR
    design = build_design(ndr.name, ndr.width, "HDR", list(ndr.nodes.values()),
                          [dl._replace(speed="HDR") for dl in ndr.links], ndr.source)
    t0 = time.perf_counter()
    with IbFabric(design, timeout_s=120) as fabric:
        t1 = time.perf_counter()
        text = fabric.discover()
        t2 = time.perf_counter()
    result = run(design, topology_from_texts([("ibsim", text)]))
    t3 = time.perf_counter()
    return {"scenario": "ibsim-imbue-ibnetdiscover", "ibsim_start_s": round(t1 - t0, 2),
            "ibnetdiscover_s": round(t2 - t1, 2), "parse_identify_validate_s": round(t3 - t2, 2),
            "findings": result.report.summary["total_findings"], "capture_mb": round(len(text) / 1e6, 2)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=("selene-baseline", "selene-faults", "imbue-design", "ibsim"))
    parser.add_argument("--ibsim", action="store_true", help="also time ibnetdiscover on an Imbue-size ibsim fabric")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (the best is reported)")
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(ibsim_discovery() if args.scenario == "ibsim" else scenario(args.scenario)))
        return 0
    names = ["selene-baseline", "selene-faults", "imbue-design"] + (["ibsim"] if args.ibsim else [])
    for name in names:
        runs = []
        for _ in range(1 if name == "ibsim" else args.repeat):
            proc = subprocess.run([sys.executable, __file__, "--scenario", name], capture_output=True, text=True,
                                  check=False, cwd=REPO)
            if proc.returncode != 0:
                print(f"{name}: failed: {proc.stderr.strip().splitlines()[-1:]}")
                break
            runs.append(json.loads(proc.stdout))
        if runs:
            key = "ibnetdiscover_s" if name == "ibsim" else "total_s"
            best = min(runs, key=lambda r: float(r[key]))  # type: ignore[arg-type]
            print(json.dumps(best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
