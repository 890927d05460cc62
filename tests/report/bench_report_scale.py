"""How long `provision report` takes on the Imbue-scale site (511 hosts, 3-tier NDR design): a state store
walked to golden with a health result per host (20 checks), 10% failed with a health report, a burn-in run
over every directed link of the design (one flow each) and a few links disabled in the port ledger.

    .venv/bin/python -m tests.report.bench_report_scale
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from fabric.burnin.history import FlowRow, History
from fabric.design import load_design
from fabric.ports.ledger import DISABLED, Ledger, LedgerEnd, LedgerEntry
from provision.site.loader import load_site
from provision.state import Change, State, StateStore
from provision.state.lifecycle import FLOW
from report import gather, write_html

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "inventory" / "examples" / "imbue-scale.yml"
CHECKS = [f"check_{i:02d}" for i in range(20)]


def _health(failed: bool) -> dict[str, object]:
    checks = [{"check": c, "status": "ok", "summary": f"{c} fine"} for c in CHECKS]
    if not failed:
        return {"level": "fast", "verdict": "healthy", "checks": checks}
    checks[3] = {"check": CHECKS[3], "status": "critical", "summary": "Xid 79", "reason": "xid_79",
                 "remediation": "drain the host, reset the GPU"}
    return {"level": "fast", "exit_status": 2, "report": {"verdict": "critical", "checks": checks}}


def populate(store: StateStore, hosts: list[str]) -> None:
    changes: list[Change] = []
    for i, host in enumerate(hosts):
        changes += [Change(host, s, "bench", evidence={"pad": "x" * 200}) for s in FLOW[1:FLOW.index(State.configured) + 1]]
        if i % 10 == 3:
            changes.append(Change(host, State.failed, "health fast", reason="xid_79", evidence=_health(True)))
        else:
            changes += [Change(host, State.healthy, "health fast", evidence=_health(False)),
                        Change(host, State.burned_in, "burn-in"), Change(host, State.golden, "golden")]
    store.transition_many(changes)


def burn_in(store: StateStore, design_path: Path) -> int:
    design = load_design(design_path)
    guid = {name: f"{i + 1:016x}" for i, name in enumerate(design.nodes)}
    entries, flows = [], []
    for link in design.links:
        kind = "switch-switch" if "/" not in link.a.node + link.b.node else "hca-leaf"
        for a, b in ((link.a, link.b), (link.b, link.a)):
            directed = f"{guid[a.node]}[{a.port}]->{guid[b.node]}[{b.port}]"
            this_kind = kind if kind == "switch-switch" or "/" in a.node else "leaf-hca"
            entries.append({"link": directed, "name": f"{a} -> {b}", "kind": this_kind, "ends": [str(a), str(b)]})
            gbps = 180.0 if len(flows) % 97 == 5 else 390.0
            flows.append(FlowRow(1, directed, directed + "'", str(a), str(b), gbps, "ok", ""))
    plan = {"floor_gbps": 360.0, "links": entries, "stages": [[{"src": f.src, "dst": f.dst, "links": [f.src]}
                                                                for f in flows]]}
    history = History(store)
    run, _ = history.open_run(plan, 10, False)
    history.finish_stage(run, 1, time.time(), flows, [])
    history.finish_run(run)
    ledger = Ledger(store)
    for link in design.links[:: max(1, len(design.links) // 8)][:8]:
        ends = tuple(LedgerEnd(guid[p.node], p.port, p.node, "/" not in p.node) for p in (link.a, link.b))
        ledger.record(LedgerEntry("-".join(sorted(e.key() for e in ends)), time.time(), "bench", "bench", DISABLED,
                                  "ufm", "bench", ends))
    return len(entries)


def main() -> None:
    site = load_site(SITE)
    with tempfile.TemporaryDirectory() as tmp:
        store = StateStore(Path(tmp) / "imbue.db")
        hosts = [h.hostname for h in site.hosts()]
        store.sync_site((h.hostname, h.rack) for h in site.hosts())
        populate(store, hosts)
        assert site.fabric_design is not None
        links = burn_in(store, site.fabric_design)
        started = time.perf_counter()
        report = gather(site.name, store, Path(tmp), site.fabric_design)
        gathered = time.perf_counter()
        page = write_html(report, Path(tmp) / "report.html")
        done = time.perf_counter()
        print(f"{len(hosts)} hosts, {store.event_count()} events, {links} directed links: gather "
              f"{gathered - started:.2f} s, render+write {done - gathered:.2f} s, total {done - started:.2f} s, "
              f"{page.stat().st_size / 1e6:.1f} MB HTML")
        store.close()


if __name__ == "__main__":
    main()
