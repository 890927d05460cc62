"""Child process for test_handler_conditions: evaluates roles' handler conditions with Ansible's templating.

Importing Ansible's templating patches `sys.intern` for the whole interpreter (and torch.compile, in the
same pytest process, then refuses to trace), so the evaluation runs here: a JSON list of
{"role": ..., "variables": {...}} on stdin, a JSON list of the names of the handlers that would run on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROLES = Path(__file__).resolve().parents[2] / "roles"


def running(role: str, variables: dict[str, object]) -> list[str]:
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
