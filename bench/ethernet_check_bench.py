"""`provision ethernet check`'s library call against the switch simulator at the issue's size: 40 top-of-rack
switches x 48 ports (the platforms in turn: NX-OS, EOS, Dell OS10, SONiC by default; --platforms), 512
hosts with a BMC and a PXE NIC each, the issue's cabling faults (two crossed, one unplugged, one
error-disabled) and one PXE NIC only LLDP hears (silent); every switch also answers its LLDP neighbours
(each linked PXE NIC); prints the whole time, the per-switch times (min/median/max, the slowest, the
median per platform), the LLDP neighbours read, and the findings.

    flock /tmp/bringup-lab.lock .venv/bin/python bench/ethernet_check_bench.py [--switches 40 --hosts 512]
        [--platforms cisco_nxos,arista_eos,dell_os10,sonic]

The simulator runs in this process (one asyncio thread) and shares the machine's cores with the check's
netmiko threads, as `sim up` would on the same controller."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from provision.ethernet.check import check
    from provision.ethernet.design import parse_design
    from provision.site.credentials import Login, Secret
    from sim.switches.asbuilt import EthernetFaults, LabHost, build
    from sim.switches.harness import running

    p = argparse.ArgumentParser()
    p.add_argument("--switches", type=int, default=40)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--platforms", default="cisco_nxos,arista_eos,dell_os10,sonic")
    a = p.parse_args()
    hosts = []
    for i in range(a.hosts):
        rack, u, mac = i % a.switches + 1, i // a.switches + 1, f"02:00:01:{i >> 8:02x}:{i & 255:02x}"
        hosts.append(LabHost(f"gpu-r{rack}-{u:02d}", f"r{rack:02d}", u, f"{mac}:01", f"{mac}:02"))
    first = sorted(h.name for h in hosts if h.rack == "r01")
    faults = EthernetFaults(crossed=[(first[0], first[1])], unplugged=[first[2]], err_disabled=[first[3]],
                            silent=[first[4]])
    design_data, asbuilt = build(hosts, faults, platforms=tuple(a.platforms.split(",")))
    design = parse_design(yaml.safe_dump(design_data), "bench")
    password = "bench-switch-password"
    with running(asbuilt, password):
        start = time.monotonic()
        report = check(design, lambda _n: Login("admin", Secret(password)), concurrency=a.concurrency,
                       timeout=a.timeout)
        took = time.monotonic() - start
    data = report.to_json()
    per = sorted((s["seconds"], s["name"]) for s in data["switches"])  # type: ignore[attr-defined]
    secs = [t for t, _ in per]
    ports = sum(len(s["ports"]) for s in asbuilt["switches"])
    print(f"{len(per)} switches, {ports} ports, {len(report.nics)} NICs: whole check {took:.2f} s "
          f"(concurrency {a.concurrency}); per switch min {secs[0]:.2f} median {statistics.median(secs):.2f} "
          f"max {secs[-1]:.2f} s; slowest {per[-1][1]}; platforms {a.platforms}")
    by_platform: dict[str, list[float]] = {}
    for s in data["switches"]:  # type: ignore[attr-defined]
        by_platform.setdefault(s["platform"], []).append(s["seconds"])
    print("per switch median by platform (s):",
          ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in sorted(by_platform.items())))
    print("per switch (s):", ", ".join(f"{n} {t:.2f}" for t, n in sorted(per, key=lambda x: x[1])))
    print("switches not read:", [(s["name"], s["reason"]) for s in data["switches"] if s["state"] != "ok"])  # type: ignore[attr-defined]
    heard = sum(len(n) for v in report.switches.values() for n in v.lldp.values())
    print("counts:", json.dumps(data["counts"]), "LLDP neighbours read:", heard)
    for f in report.findings:
        print(f"  {f.host} {f.role}: {f.status}: {f.fix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
