"""Benchmark: `provision slurm sync` of 512 hosts against a real slurmctld with 512 nodes defined.

The Imbue-scale site (511 HGX hosts) plus one host, with a `slurm:` section; the lab's Slurm (sim/slurm/lab.py:
Debian's slurmctld 22.05 and munged) defines every host as a node. No slurmd runs (512 daemons do not fit a
2-core machine and the sync never talks to them): the nodes are NOT_RESPONDING to Slurm, which drains and
resumes them all the same. Runs, each as an operator would (`python -m provision slurm sync --json`, so the
figure includes the CLI's start):

1. first sync: every host golden, none drained: records each node's standing once (512 history events);
2. full sync: 112 hosts failed (20 reasons, over 7 minutes) and 100 hosts golden again that the previous
   sync had drained: 112 drains and 100 resumes in as few `scontrol update` calls as reasons allow;
3. no-change sync: nothing to send, nothing to record.

Goals (issue #36): full sync <= 5 s, no-change sync <= 1 s. Needs root, slurmctld and munged.

    python bench/slurm_sync.py [--hosts 512] [--runs 3]

Prints figures only; it asserts nothing (timings are not tests).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from provision.site import load_site  # noqa: E402
from provision.site.store import open_store  # noqa: E402
from provision.state.lifecycle import State  # noqa: E402
from sim.slurm.lab import Partition, SlurmLab, SlurmLabSpec  # noqa: E402

REASONS = ["xid_79", "xid_48", "pcie_width_x4", "ecc_uncorrected", "ib_port_disabled", "nvlink_down",
           "gpu_missing", "hca_missing", "thermal_slowdown", "burnin_link_slow", "driver_mismatch", "disk_missing",
           "zpool_degraded", "fabricmanager_down", "dcgm_diag_failed", "remapped_rows_pending", "clock_slowdown",
           "cpu_governor", "swap_enabled", "ntp_unsynced"]


def make_site(directory: Path, hosts: int) -> Path:
    src = REPO / "inventory" / "examples" / "imbue-scale.yml"
    data = yaml.safe_load(src.read_text())
    all_hosts = [h for rack in data["racks"] for h in rack["hosts"]]
    last = data["racks"][-1]
    while len(all_hosts) < hosts:
        n = len(all_hosts)
        host = {"hostname": f"gpu-extra-{n:03d}", "u": 1 + n % 40, "role": "gpu", "class": "hgx-h100",
                "bmc": {"address": f"127.0.19.{1 + n % 250}", "port": 8443, "credential": "idrac"}}
        last["hosts"].append(host)
        all_hosts.append(host)
    data["slurm"] = {"cluster_name": "imbue", "controller": all_hosts[0]["hostname"],
                     "partitions": [{"name": "gpu", "classes": ["hgx-h100"], "default": True}], "timeout_s": 30}
    (directory / "fabric").mkdir(parents=True, exist_ok=True)
    for f in (REPO / "inventory" / "examples" / "fabric").glob("imbue-scale*"):
        (directory / "fabric" / f.name).write_bytes(f.read_bytes())
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sync(site: Path, env: dict[str, str]) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "provision", "slurm", "sync", "--site", str(site), "--json"],
                          capture_output=True, text=True, env=env, check=False, cwd=REPO)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"sync failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, json.loads(done.stdout)


def line(name: str, wall: float, out: dict[str, object]) -> None:
    decisions = out["decisions"]
    assert isinstance(decisions, list)
    acting = sum(1 for d in decisions if d["action"] != "none")
    print(f"{name:<16} wall {wall:6.2f} s  (library {out['wall_s']:.2f} s)  changes {acting:4d}  "
          f"scontrol calls {out['scontrol_calls']:3}  recorded {len(out['recorded']):4d}")  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3, help="full + no-change rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bringup-slurm-bench-") as tmp:
        root = Path(tmp)
        site_path = make_site(root / "site", args.hosts)
        site = load_site(site_path)
        names = [h.hostname for h in site.hosts()]
        env = {**os.environ, "BRINGUP_STATE_DB": str(root / "state.db")}
        os.environ["BRINGUP_STATE_DB"] = env["BRINGUP_STATE_DB"]
        store = open_store(site, None)
        store.sync_site((h.hostname, h.rack) for h in site.hosts())
        for name in names:
            store.mark(name, State.golden, reason="bench setup")
        lab = SlurmLab(root / "slurm", SlurmLabSpec("imbue", tuple(names), (Partition("gpu", tuple(names), True),)))
        env.update(lab.env())
        with lab.running(nodes=[]):
            print(f"{len(names)} hosts, slurmctld with {len(names)} nodes; load {os.getloadavg()[0]:.2f}")
            wall, out = sync(site_path, env)
            line("first", wall, out)
            fulls, idles = [], []
            for run in range(args.runs):
                # Leave: 112 hosts fail (20 reasons, over 7 minutes); the 100 that failed last round earn golden.
                failed = names[(run * 112) % len(names):][:112]
                back = store.in_state(State.failed)[:100]
                for i, name in enumerate(failed):
                    store.mark(name, State.failed, reason=REASONS[i % len(REASONS)])
                for name in back:
                    store.mark(name, State.golden, reason="repaired")
                wall, out = sync(site_path, env)
                fulls.append(wall)
                line(f"full {run + 1}", wall, out)
                wall, out = sync(site_path, env)
                idles.append(wall)
                line(f"no-change {run + 1}", wall, out)
            print(f"full sync median {statistics.median(fulls):.2f} s (goal <= 5 s); "
                  f"no-change median {statistics.median(idles):.2f} s (goal <= 1 s); load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
