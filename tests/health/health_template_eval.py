"""Child process for test_expectations_schema: renders the health_agent role's expectations template with Ansible.

Importing Ansible's templating patches `sys.intern` for the whole interpreter (see
tests/ansible/handler_conditions_eval.py), so the rendering runs here: a JSON list of variable sets on
stdin (each a host's variables: inventory host vars, role defaults, inventory_hostname), a JSON list of
the rendered files on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[2] / "roles" / "health_agent"


def rendered(variables: dict[str, object]) -> str:
    templar = Templar(loader=DataLoader(), variables=variables)
    text = (ROLE / "templates" / "health.json.j2").read_text(encoding="utf-8")
    return str(templar.template(trust_as_template(text)))


def main() -> int:
    filter_loader.add_directory(str(ROLE / "filter_plugins"))
    json.dump([rendered(v) for v in json.load(sys.stdin)], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
