"""Redfish at Imbue scale: `harvest-macs` and `pxe-boot` over 512 simulated BMCs answering with
150 ms latency, and the same NIC harvest through Ansible's `community.general.redfish_info`
(`GetNicInventory`, forks=25) against the same simulator, side by side.

Goals (issue 3): harvest <= 8 s wall, pxe-boot <= 10 s, harvest process < 300 MB; Ansible >= 20x slower.

    .venv/bin/python bench/redfish_bench.py [--hosts 512] [--latency-ms 150] [--concurrency 512]
                                            [--ansible-hosts N | --no-ansible]

Every command runs as a user runs it: a fresh `provision` process (its wall time and peak RSS are
measured from here), the BMC password only in the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.addresses import bmc_address, free_port  # noqa: E402

PASSWORD_VAR = "BRINGUP_BENCH_BMC_PASSWORD"
CONTROL = "127.0.2.10"


def write_site(directory: Path, hosts: int, port: int) -> Path:
    lines = [
        "name: bench",
        "bmc_tls: {verify: false}",
        f"credentials: {{idrac: {{username: root, password: {{env: {PASSWORD_VAR}}}}}}}",
        "host_classes:",
        "  hgx-h100:",
        "    gpu: {model: NVIDIA H100 80GB HBM3, count: 8}",
        "    ib: {hca_count: 8, link_speed: NDR}",
        "    pxe_nic: NIC.Integrated.1-1-1",
        "racks:",
    ]
    for r in range((hosts + 7) // 8):
        lines += [f"  - name: r{r:02d}", "    hosts:"]
        for i in range(r * 8, min(hosts, r * 8 + 8)):
            lines.append(f"      - {{hostname: gpu-{r:02d}-{i % 8 + 1:02d}, u: {i % 8 * 5 + 3}, role: gpu, "
                         f"class: hgx-h100, bmc: {{address: {bmc_address(i)}, port: {port}, credential: idrac}}}}")
    path = directory / "site.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(argv: list[str], env: dict[str, str], log: Path, cwd: Path = REPO) -> tuple[float, int, int, float]:
    """Run a command; return (wall seconds, exit code, peak RSS in MB, CPU seconds user+system)."""
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, os.waitstatus_to_exitcode(status), usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime


def sim_requests(control: str) -> int:
    """Requests the simulator's BMCs have answered so far, all together (its control API counts them)."""
    with urllib.request.urlopen(f"http://{control}/hosts", timeout=10) as resp:
        return sum(int(bmc["requests"]) for bmc in json.load(resp).values())


def sim_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ansible_harvest(site: Path, hosts: list[dict[str, Any]], forks: int, env: dict[str, str], work: Path,
                    log: Path) -> tuple[float, int, int, float]:
    inventory = {"all": {"hosts": {h["hostname"]: {"bmc": f"{h['address']}:{h['port']}"} for h in hosts},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (work / "inventory.json").write_text(json.dumps(inventory))
    (work / "nics.yml").write_text(
        "- hosts: all\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: NIC inventory through Redfish\n"
        "      community.general.redfish_info:\n"
        "        category: Systems\n"
        "        command: GetNicInventory\n"
        "        baseuri: '{{ bmc }}'\n"
        "        username: root\n"
        f"        password: \"{{{{ lookup('env', '{PASSWORD_VAR}') }}}}\"\n"
        "        validate_certs: false\n"
        "      register: nics\n")
    bin_dir = Path(sys.executable).parent
    argv = [str(bin_dir / "ansible-playbook"), "-i", str(work / "inventory.json"), "-f", str(forks),
            str(work / "nics.yml")]
    ansible_env = {**env, "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_STDOUT_CALLBACK": "default",
                   "ANSIBLE_LOCAL_TEMP": str(work / "tmp"), "ANSIBLE_HOME": str(work / "home")}
    # Stock Ansible, as the issue compares against: run from the work directory so the repository's
    # ansible.cfg (Mitogen strategy, tuned for the site playbooks over SSH) is not picked up.
    wall, code, _rss, cpu = timed(argv, {**ansible_env, "ANSIBLE_STRATEGY": "linear"}, log, cwd=work)
    recap = log.read_text(errors="replace")
    ok = sum(1 for line in recap.splitlines() if ": ok=" in line and "failed=0" in line and "unreachable=0" in line)
    return wall, code, ok, cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=512)
    p.add_argument("--latency-ms", type=float, default=150.0)
    p.add_argument("--power-delay-ms", type=float, default=1000.0)
    p.add_argument("--concurrency", type=int, default=512)
    p.add_argument("--poll", type=float, default=None, help="pxe-boot --poll (default: the power delay)")
    p.add_argument("--forks", type=int, default=25)
    p.add_argument("--ansible-hosts", type=int, default=None, help="run Ansible on the first N hosts only")
    p.add_argument("--no-ansible", action="store_true")
    p.add_argument("--auth", choices=("session", "basic"), default="session", help="provision's --auth")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="redfish-bench-"))
    password = secrets.token_urlsafe(12)
    env = {**os.environ, PASSWORD_VAR: password, "PYTHONUNBUFFERED": "1"}
    site = write_site(work, args.hosts, free_port())
    control_port = free_port(CONTROL)
    sim_log = (work / "sim.log").open("wb")
    sim = subprocess.Popen(
        [sys.executable, "-m", "sim.redfish", "--site", str(site), "--cert-dir", str(work / "certs"),
         "--control", f"{CONTROL}:{control_port}", "--latency-ms", str(args.latency_ms),
         "--power-delay-ms", str(args.power_delay_ms)],
        env=env, cwd=REPO, stdout=sim_log, stderr=subprocess.STDOUT, start_new_session=True)
    figures: dict[str, Any] = {"hosts": args.hosts, "latency_ms": args.latency_ms, "cpus": os.cpu_count(),
                               "auth": args.auth,
                               "load_before": os.getloadavg()[0]}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection((CONTROL, control_port), timeout=0.2):
                    break
            except OSError:
                if sim.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"simulator did not start: {(work / 'sim.log').read_text()}") from None
                time.sleep(0.1)
        db = work / "state.db"
        common = ["--site", str(site), "--db", str(db), "--concurrency", str(args.concurrency), "--json",
                  "--auth", args.auth]
        provision = [sys.executable, "-m", "provision.cli"]
        # One PowerState read per power change when the simulator keeps to its configured delay.
        poll_s = args.poll if args.poll is not None else max(args.power_delay_ms / 1000, 0.05)
        for name, argv in (("harvest", [*provision, "harvest-macs", *common]),
                           ("pxe_boot", [*provision, "pxe-boot", *common, "--poll", str(poll_s)])):
            sim_cpu = sim_cpu_s(sim.pid)
            requests = sim_requests(f"{CONTROL}:{control_port}")
            load = os.getloadavg()[0]
            wall, code, rss, cpu = timed(argv, env, work / f"{name}.json")
            counts = json.loads((work / f"{name}.json").read_text())["counts"]
            per_host = (sim_requests(f"{CONTROL}:{control_port}") - requests) / args.hosts
            figures[name] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                             "simulator_cpu_s": round(sim_cpu_s(sim.pid) - sim_cpu, 2), "exit": code,
                             "peak_rss_mb": rss, "requests_per_host": round(per_host, 2),
                             "load_at_start": round(load, 2), **counts}

        if not args.no_ansible:
            from provision.site import load_site

            hosts = [{"hostname": h.hostname, "address": h.bmc.address, "port": h.bmc.port}
                     for h in load_site(site).hosts()][: args.ansible_hosts or args.hosts]
            load = os.getloadavg()[0]
            sim_cpu = sim_cpu_s(sim.pid)
            wall, code, ok, cpu = ansible_harvest(site, hosts, args.forks, env, work, work / "ansible.log")
            figures["ansible_redfish_info"] = {"hosts": len(hosts), "forks": args.forks, "wall_s": round(wall, 2),
                                              "cpu_s": round(cpu, 2),
                                              "simulator_cpu_s": round(sim_cpu_s(sim.pid) - sim_cpu, 2),
                                              "exit": code, "hosts_ok": ok, "load_at_start": round(load, 2)}
            per_host_ours = figures["harvest"]["wall_s"] / args.hosts
            per_host_ansible = wall / len(hosts)
            figures["ratio_ansible_over_ours"] = round(per_host_ansible / per_host_ours, 1)
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        sim.wait(timeout=20)
        sim_log.close()
    figures["load_after"] = os.getloadavg()[0]
    figures["work_dir"] = str(work)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
