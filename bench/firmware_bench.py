"""Firmware at Imbue scale (issue 40): `provision firmware inventory` over 512 simulated iDRACs (a fresh process,
as a user runs it), and the rollout plan of 512 hosts (in process, the pure planner on the recorded judgements).

Goals: inventory of 512 BMCs <= 10 s wall; a 512-host rollout plan <= 1 s.
Measured here (2 shared cores, 2026-12-06): 5.11 s wall at load average 6 (controller 2.8 s CPU, simulator 1.6 s),
19.1 s at load average 20; plan 86 ms (52 hosts to update in 3 waves) to 520 ms under load.

    .venv/bin/python bench/firmware_bench.py [--hosts 512] [--latency-ms 150] [--concurrency 512]

A tenth of the hosts run an older BIOS (firmware-sim.yml), so the inventory records drift for them and the plan
has real work: canary, then batches of the site's batch_size.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.redfish_bench import PASSWORD_VAR, free_port, timed, write_site  # noqa: E402

BASELINE = """    firmware:
      components:
        - {kind: bios, version: 1.15.0, image: {file: images/bios.bin, sha256: %s}}
        - {kind: bmc, min_version: 7.10.30.00}
        - {kind: hca, version: 28.43.1014}
      bios: {SysProfile: PerfOptimized, ProcCStates: Disabled}
"""


def prepare(directory: Path, hosts: int, port: int) -> tuple[Path, list[str]]:
    import hashlib

    site = write_site(directory, hosts, port)
    image = b"BRINGUP-SIM-FIRMWARE kind=bios version=1.15.0\n"
    (directory / "images").mkdir()
    (directory / "images" / "bios.bin").write_bytes(image)
    text = site.read_text().replace("    pxe_nic: NIC.Integrated.1-1-1\n", "    pxe_nic: NIC.Integrated.1-1-1\n"
                                    + BASELINE % hashlib.sha256(image).hexdigest())
    site.write_text(text + "firmware_rollout: {canary: 1, batch_size: 32, image_url: 'http://127.0.0.1:8099/'}\n")
    names = [line.split("hostname: ")[1].split(",")[0] for line in text.splitlines() if "hostname: " in line]
    old = names[::10]
    (directory / "firmware-sim.yml").write_text(json.dumps({"installed": {n: {"bios": "1.14.1"} for n in old}}))
    return site, old


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=512)
    ap.add_argument("--latency-ms", type=float, default=150.0)
    ap.add_argument("--concurrency", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        site, old = prepare(d, args.hosts, free_port())
        env = {**os.environ, PASSWORD_VAR: secrets.token_urlsafe(16)}
        sim = subprocess.Popen([sys.executable, "-m", "sim.redfish", "--site", str(site), "--cert-dir",
                                str(d / "certs"), "--latency-ms", str(args.latency_ms), "--control",
                                f"127.0.2.10:{free_port('127.0.2.10')}"], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            assert sim.stdout is not None
            first = sim.stdout.readline().decode()
            if not first.startswith("serving"):
                raise SystemExit(f"simulator did not start: {first}")
            db = d / "state.db"
            wall, rc, rss, cpu = timed([sys.executable, "-m", "provision", "firmware", "inventory", "--site",
                                        str(site), "--db", str(db), "--json", "--concurrency",
                                        str(args.concurrency)], env, d / "inventory.log")
            log = (d / "inventory.log").read_text()
            out, _ = json.JSONDecoder().raw_decode(log[log.index("{"):])  # stderr may follow
            drift = sorted(h["host"] for h in out["hosts"] if h.get("reason") == "firmware_drift")
            print(f"inventory: {args.hosts} BMCs at {args.latency_ms:g} ms in {wall:.2f} s wall, rc {rc}, "
                  f"peak RSS {rss} MB, CPU {cpu:.1f} s; drift found on {len(drift)} (injected {len(old)}), "
                  f"counts {out['counts']}")
            assert drift == sorted(old), "the inventory did not find exactly the injected drift"
            ticks = Path(f"/proc/{sim.pid}/stat").read_text().rsplit(")", 1)[1].split()
            print(f"simulator CPU {(int(ticks[11]) + int(ticks[12])) / os.sysconf('SC_CLK_TCK'):.1f} s")
        finally:
            os.killpg(sim.pid, 15)
            sim.wait(timeout=20)
        from provision.firmware.rollout import current_plan
        from provision.site import load_site
        from provision.state import StateStore

        loaded = load_site(site)
        store = StateStore(db)
        start = time.perf_counter()
        plan = current_plan(loaded, store, "firmware")
        took = time.perf_counter() - start
        print(f"plan: {len(plan.hosts)} hosts to update of {args.hosts} in {len(plan.waves)} waves "
              f"({plan.on_baseline} on baseline) in {took * 1000:.0f} ms")
        return 0 if wall <= 10 and took <= 1 and rc == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
