"""Benchmark: `provision health` (fast) over N simulated SSH hosts on loopback, some faulty, slow or hung.

    .venv/bin/python bench/health_fanout.py [--hosts 512] [--timeout 10] [--concurrency 64] [--agent-mode fork]

Every host is its own sshd endpoint (127.0.32.0/20) running the real health agent on replayed H200
captures. Faults: captures with an Xid 79, a PCIe x4 link, uncorrected ECC errors, an IB port down;
slow hosts (2-6 s late); hung commands, hung handshakes and refused ports. Prints the wall time of the
whole command (interpreter start to exit), the verdict counts, and when the hung hosts were given up
on; then the agent's fast level on one host, as a process of its own. Target: <= 30 s for 512 hosts,
< 5 s for the agent.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.sshhosts.harness import REPLAY_ROOT, SshLab, replayed_machine  # noqa: E402
from sim.sshhosts.sitegen import write_site  # noqa: E402


def faults_for(count: int) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    step = max(1, count // 64)

    def name(i: int) -> str:
        return f"gpu-{i % count + 1:04d}"

    kinds: list[dict[str, Any]] = (
        [{"fixture": "h200x2-xid79"}] * 2 + [{"fixture": "h200x2-pcie-x4"}] * 2
        + [{"fixture": "h200x2-ecc-uncorrected"}] * 2 + [{"fixture": "h200x2-ib-port-down"}] * 2
        + [{"endpoint": "hang"}] * 4 + [{"endpoint": "hang_handshake"}] * 2 + [{"endpoint": "refuse"}] * 2
        + [{"delay_s": 2.0 + (k % 5)} for k in range(16)]
    )
    for k, fault in enumerate(kinds):
        hosts[name(3 + k * step)] = fault
    return hosts


def _cpu_s(pid: int) -> float:
    """utime + stime of a process and of its children that it has reaped (the forked agents)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _family(pid: int) -> list[int]:
    out = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in task.read_text().split():
            out.extend(_family(int(child)))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--timeout", type=float, default=10.0, help="per-host timeout, seconds")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--agent-mode", choices=("fork", "spawn"), default="fork")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-health-") as tmp:
        root = Path(tmp)
        class_spec, overlay = replayed_machine()
        site = write_site(root, args.hosts, class_spec=class_spec, host_class="h200x2", name="bench",
                          policy={"golden_requires_burn_in": False})
        (root / "health-expectations.yml").write_text(yaml.safe_dump({"host_classes": {"h200x2": overlay}}))
        plan = faults_for(args.hosts)
        faults = root / "health-faults.yml"
        faults.write_text(yaml.safe_dump({"fixture_root": str(REPLAY_ROOT), "default_fixture": "h200x2-ib-healthy",
                                          "hosts": plan}))
        db = root / "state.db"
        subprocess.run([sys.executable, "-m", "provision.cli", "--help"], cwd=REPO, capture_output=True, check=False)
        from provision.site import load_site
        from provision.state import State, StateStore

        store = StateStore(db, actor="bench")
        store.sync_site((h.hostname, h.rack) for h in load_site(site).hosts())
        for host in store.hosts():
            store.mark(host.hostname, State.configured, reason="bench setup")
        store.close()

        t0 = time.monotonic()
        with SshLab(site, faults, root / "lab", agent_mode=args.agent_mode) as lab:
            started = time.monotonic() - t0
            env = {**os.environ, **lab.env}
            cmd = [str(REPO / ".venv" / "bin" / "provision"), "health", "--site", str(site), "--db", str(db),
                   "--json", "--timeout", str(args.timeout), "--concurrency", str(args.concurrency)]
            server = lab.lab.running()["sshhosts"]
            sim_before = sum(_cpu_s(p) for p in _family(server))
            ctl_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t1 = time.monotonic()
            proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, check=False)
            wall = time.monotonic() - t1
            ctl_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            sim_cpu = sum(_cpu_s(p) for p in _family(server)) - sim_before
            ctl_cpu = (ctl_after.ru_utime + ctl_after.ru_stime) - (ctl_before.ru_utime + ctl_before.ru_stime)
            load = os.getloadavg()[0]
        if not proc.stdout.strip():
            print(proc.stderr, file=sys.stderr)
            return 1
        payload = json.loads(proc.stdout)
        hung = {h for h, f in plan.items() if f.get("endpoint") in ("hang", "hang_handshake")}
        hung_rows = [h for h in payload["hosts"] if h["host"] in hung]
        healthy_rows = [h for h in payload["hosts"] if h["verdict"] == "healthy"]
        print(f"hosts: {args.hosts}  concurrency: {args.concurrency}  per-host timeout: {args.timeout:g} s  "
              f"agent: {args.agent_mode}  cpus: {os.cpu_count()}")
        print(f"simulator start (keys, {args.hosts} listeners): {started:.1f} s")
        print(f"provision health --level fast, whole command: {wall:.1f} s (run itself {payload['duration_s']:.1f} s)")
        print(f"CPU: controller {ctl_cpu:.1f} s, simulator + agents {sim_cpu:.1f} s "
              f"(load average {load:.1f} on {os.cpu_count()} CPUs: other work on the machine slows the wall time)")
        print(f"verdicts: {payload['by_verdict']}")
        print(f"top reasons: {payload['top_reasons']}")
        print(f"hung hosts: {len(hung_rows)} reported "
              f"{sorted({h['verdict'] + '/' + str(h['reason']) for h in hung_rows})} after "
              f"{min(h['duration_s'] for h in hung_rows):.1f}-{max(h['duration_s'] for h in hung_rows):.1f} s")
        if healthy_rows:
            times = sorted(h["duration_s"] for h in healthy_rows)
            print(f"healthy host round trip: median {statistics.median(times):.2f} s, max {times[-1]:.2f} s")
        print(f"golden after the run: {len(payload['promoted_to_golden'])}")

        config = root / "one.json"
        from provision.health.expectations import load_overlay, render_expectations

        s = load_site(site)
        config.write_text(json.dumps(render_expectations(s, s.hosts()[0], "fast", load_overlay(s, {}))))
        runs = []
        for _ in range(5):
            t = time.monotonic()
            subprocess.run(["python3", "-m", "tools.health", "--config", str(config), "--level", "fast", "--json",
                            "--replay", str(REPLAY_ROOT / "h200x2-ib-healthy")], cwd=REPO, capture_output=True,
                           check=False)
            runs.append(time.monotonic() - t)
        print(f"agent fast level on one host (replay, own process): median {statistics.median(runs):.2f} s, "
              f"max {max(runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
