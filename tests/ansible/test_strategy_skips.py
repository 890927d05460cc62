"""playbooks/strategy_plugins/mitogen_linear.py skips a task whose `when` is false on the controller, without a
worker: the results (registered values, stats, handlers, errors) must be the ones ansible-core's own linear
strategy gives, and no worker may be forked for such a skip.

Runs ansible-playbook on three `ansible_connection: local` hosts, once per strategy, with the json callback;
each run counts the workers it forks (WorkerProcess.start, patched in the controller before the CLI starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

PLAYBOOK = """
- name: Skips decided on the controller and by the worker
  hosts: all
  gather_facts: false
  tasks:
    - name: Skipped on h2 and h3, registered
      ansible.builtin.command: /bin/true
      changed_when: false
      when: inventory_hostname == 'h1'
      register: first
    - name: Skipped everywhere, notifies nothing
      ansible.builtin.command: /bin/true
      when: first is skipped and first is not skipped
      notify: Never
    - name: A when on a connection variable, left to the worker
      ansible.builtin.debug:
        msg: "{{ ansible_host }}"
      when: ansible_host == 'nowhere'
    - name: A loop, when per item
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: [1, 2]
      when: item == 2 and inventory_hostname == 'h2'
    - name: Record what each host registered
      ansible.builtin.set_fact:
        seen: "{{ {'skipped': first is skipped, 'reason': first.skip_reason | default(''),
                   'false_condition': first.false_condition | default('')} }}"
    - name: A when that cannot be evaluated fails the host as the worker says
      ansible.builtin.debug:
        msg: unreachable
      when: no_such_variable.field == 1 and inventory_hostname == 'h3'
      ignore_errors: true
      register: broken
  handlers:
    - name: Never
      ansible.builtin.debug:
        msg: never
"""

RUNNER = """
import sys
from pathlib import Path
from ansible.executor.process import worker
count = Path(sys.argv[1])
start = worker.WorkerProcess.start
def counted(self):
    with count.open("a") as out:
        out.write("1")
    return start(self)
worker.WorkerProcess.start = counted
from ansible.cli.playbook import main
sys.argv = ["ansible-playbook", *sys.argv[2:]]
main()
"""


def _run(tmp: Path, strategy: str) -> tuple[dict[str, Any], int]:
    (tmp / "inventory.ini").write_text("[all]\nh1 ansible_connection=local\nh2 ansible_connection=local\n"
                                       "h3 ansible_connection=local\n")
    (tmp / "play.yml").write_text(PLAYBOOK)
    count = tmp / f"forks-{strategy}"
    count.write_text("")
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STRATEGY": strategy,
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
           "ANSIBLE_LOCAL_TEMP": str(tmp / "tmp"), "ANSIBLE_HOME": str(tmp / "home")}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(count), "-i", str(tmp / "inventory.ini"),
                           str(tmp / "play.yml")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout[done.stdout.index("{"):]), len(count.read_text())


def _outcomes(report: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    keep = ("changed", "skipped", "skip_reason", "false_condition", "failed", "msg", "ansible_facts", "results")
    out = []
    for task in report["plays"][0]["tasks"]:
        for host, result in sorted(task["hosts"].items()):
            shown = {k: v for k, v in result.items() if k in keep}
            if "results" in shown:
                shown["results"] = [{k: v for k, v in r.items() if k in ("skipped", "msg", "item")}
                                    for r in shown["results"]]
            out.append((task["task"]["name"], host, shown))
    return out


def test_controller_skips_match_ansible_cores_linear_strategy_and_fork_no_worker(tmp_path: Path) -> None:
    ours, our_forks = _run(tmp_path, "mitogen_linear")
    stock, stock_forks = _run(tmp_path, "linear")
    assert _outcomes(ours) == _outcomes(stock)
    assert ours["stats"] == stock["stats"]
    seen = {h: r["ansible_facts"]["seen"] for n, h, r in _outcomes(ours) if n == "Record what each host registered"}
    assert seen["h2"] == {"skipped": True, "reason": "Conditional result was False",
                          "false_condition": "inventory_hostname == 'h1'"}
    assert seen["h1"]["skipped"] is False
    broken = {h: r for n, h, r in _outcomes(ours) if n.startswith("A when that cannot")}
    assert all(r.get("failed") for r in broken.values()) and "no_such_variable" in broken["h1"]["msg"]
    # Stock: a worker for each of 6 tasks on 3 hosts. Ours: none for the 2 skips on h2/h3 and the 3 on the
    # always-false task; the ansible_host, loop and failing tasks still go to workers.
    assert stock_forks == 18
    assert our_forks == stock_forks - 5
