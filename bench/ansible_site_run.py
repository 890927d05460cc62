"""Benchmark: site.yml on N Debian test hosts: first run, then the no-op second run (target <= 90 s on
16 hosts on a 2-core machine), with the per-role and slowest-task breakdown from profile_tasks/profile_roles.

    python bench/ansible_site_run.py [--hosts 16] [--forks 16] [--run-dir DIR]

Prints figures only; it asserts nothing (timings are not tests).
"""

from __future__ import annotations

import argparse
import os
import re
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


def run(inventory: Path, forks: int) -> tuple[float, int, str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORKS": str(forks), "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "15",
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks,ansible.posix.profile_roles",
           "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks/site.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    return time.monotonic() - started, done.returncode, done.stdout + done.stderr


def summary(label: str, seconds: float, rc: int, output: str) -> None:
    recap = output.rsplit("PLAY RECAP", 1)[-1]
    changed = [int(m) for m in re.findall(r"changed=(\d+)", recap.split("\n\n")[0])]
    print(f"\n== {label}: {seconds:.1f} s wall, rc {rc}, hosts {len(changed) - 1 if changed else 0}, "
          f"changed per host max {max(changed) if changed else 'n/a'}")
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
    parser.add_argument("--run-dir", type=Path)
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="bench-testhosts-"))
    started = time.monotonic()
    lab = lab_mod.up(run_dir, args.hosts)
    print(f"{args.hosts} test hosts up in {time.monotonic() - started:.1f} s (base and repository cached after "
          f"the first time); load average {os.getloadavg()[0]:.1f}")
    try:
        for label in ("first run", "second (no-op) run"):
            seconds, rc, output = run(lab.inventory, args.forks)
            summary(label, seconds, rc, output)
            if rc != 0:
                print(output[-3000:])
                return 1
    finally:
        problems = lab_mod.down(run_dir)
        print("\ntest hosts down" + (f", problems: {problems}" if problems else ", nothing left behind"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
