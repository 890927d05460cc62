"""Benchmark: site.yml on N Debian test hosts: first run, then no-op runs back to back (target <= 60 s on
16 hosts on a 2-core machine; each run is printed and their median, as one run varies by about 10%), with
the per-role and slowest-task breakdown from profile_tasks/profile_roles,
the tasks each host went through (ok + skipped + failed in the recap), the controller's CPU seconds
(ansible-playbook, its workers and ssh clients: less sensitive to other jobs on the cores than wall time) and
the load average before and after each run. The full output of each run is kept in the run directory
(first-run.log, no-op-run-1.log, ...).

    flock /tmp/bringup-bench.lock python bench/ansible_site_run.py [--hosts 16] [--forks 16] [--no-op-runs 3]
                                                                   [--run-dir DIR]

Prints figures only; it asserts nothing (timings are not tests).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.testhosts import lab as lab_mod  # noqa: E402

BIN = Path(sys.executable).parent
_LINE = re.compile(r"^(.+?) -+ ([0-9.]+)s$")


def run(inventory: Path, forks: int) -> tuple[float, float, int, str]:
    """Wall seconds, the controller's CPU seconds (ansible-playbook and its workers, user + system), rc, output."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORKS": str(forks), "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all",
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks,ansible.posix.profile_roles",
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "site.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    controller = after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime
    return wall, controller, done.returncode, done.stdout + done.stderr


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summary(label: str, seconds: float, cpu: float, rc: int, output: str, loads: tuple[str, str]) -> None:
    recap = output.rsplit("PLAY RECAP", 1)[-1].split("\n\n")[0]
    hosts = {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counters)}
            for host, counters in re.findall(r"^(\S+)\s+:\s+(.*)$", recap, re.MULTILINE) if host != "localhost"}
    changed = [r.get("changed", 0) for r in hosts.values()]
    counts = sorted({r.get("ok", 0) + r.get("skipped", 0) + r.get("failed", 0) for r in hosts.values()})
    span = (f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}") if counts else "n/a"
    print(f"\n== {label}: {seconds:.1f} s wall, controller CPU {cpu:.1f} s, rc {rc}, hosts {len(hosts)}, "
          f"changed per host max {max(changed) if changed else 'n/a'}, tasks per host {span}; "
          f"load average before {loads[0]}, after {loads[1]}")
    roles = output.rsplit("ROLES RECAP", 1)[-1].split("TASKS RECAP")[0] if "ROLES RECAP" in output else ""
    tasks = output.rsplit("TASKS RECAP", 1)[-1] if "TASKS RECAP" in output else ""
    for title, block in (("per role (profile_roles)", roles), ("slowest tasks (profile_tasks)", tasks)):
        rows = [m.groups() for line in block.splitlines() if (m := _LINE.match(line.strip()))]
        if rows:
            print(f"-- {title}")
            for name, secs in rows[:15]:
                print(f"   {float(secs):7.2f} s  {name.strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--forks", type=int, default=16)
    parser.add_argument("--no-op-runs", type=int, default=3)
    parser.add_argument("--run-dir", type=Path)
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="bench-testhosts-"))
    started = time.monotonic()
    lab = lab_mod.up(run_dir, args.hosts)
    print(f"{args.hosts} test hosts up in {time.monotonic() - started:.1f} s (base and repository cached after "
          f"the first time); load average {os.getloadavg()[0]:.1f}")
    runs = [("first run", "first-run.log")] + [(f"no-op run {n}", f"no-op-run-{n}.log")
                                               for n in range(1, args.no_op_runs + 1)]
    no_op: list[tuple[float, float]] = []
    try:
        for label, log in runs:
            before = _loadavg()
            seconds, cpu, rc, output = run(lab.inventory, args.forks)
            (run_dir / log).write_text(output)
            summary(label, seconds, cpu, rc, output, (before, _loadavg()))
            if rc != 0:
                print(output[-3000:])
                return 1
            if label.startswith("no-op"):
                no_op.append((seconds, cpu))
        if no_op:
            print(f"\n== no-op median of {len(no_op)}: {statistics.median(s for s, _ in no_op):.1f} s wall, "
                  f"controller CPU {statistics.median(c for _, c in no_op):.1f} s "
                  f"(runs: {', '.join(f'{s:.1f}' for s, _ in no_op)} s)")
    finally:
        problems = lab_mod.down(run_dir)
        print("\ntest hosts down" + (f", problems: {problems}" if problems else ", nothing left behind"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
