"""Which of the roles' handlers would run, by Ansible's own templating of their `when`.

Importing Ansible's templating patches `sys.intern` for the whole interpreter (and torch.compile, in the
same pytest process, then refuses to trace), so the evaluation runs in a child process: `handlers_running`
runs this file, which reads a JSON list of {"role": ..., "variables": {...}} on stdin and writes a JSON list
of the names of the handlers that would run on stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROLES = Path(__file__).resolve().parents[2] / "roles"


def handlers_running(*cases: tuple[str, dict[str, Any]]) -> list[set[str]]:
    """For each (role, variables): the names of the role's handlers whose `when` holds (one child process)."""
    payload = json.dumps([{"role": role, "variables": variables} for role, variables in cases])
    done = subprocess.run([sys.executable, str(Path(__file__).resolve())], input=payload, capture_output=True,
                          text=True, check=True, timeout=120)
    return [set(names) for names in json.loads(done.stdout)]


def running(role: str, variables: dict[str, object]) -> list[str]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    loader = DataLoader()
    # ansible_check_mode: a magic variable Ansible always sets (False outside --check).
    templar = Templar(loader=loader, variables={"ansible_check_mode": False, **variables})
    handlers = loader.load_from_file(str(ROLES / role / "handlers" / "main.yml"), trusted_as_template=True)
    return sorted(h["name"] for h in handlers if "when" in h and templar.evaluate_conditional(h["when"]))


def main() -> int:
    cases = json.load(sys.stdin)
    json.dump([running(c["role"], c["variables"]) for c in cases], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
