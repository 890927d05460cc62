"""Child process for test_rollout_settings: runs the bringup_rollout lookup plugin (playbooks/lookup_plugins).

Importing Ansible patches `sys.intern` for the whole interpreter (and torch.compile, in the same pytest
process, then refuses to trace), so the lookup runs here: a JSON list of {"terms": [...], "variables": {...}}
on stdin, on stdout a JSON list with, per call, {"result": [...]} or {"error": message, "lookup_error": whether it is an AnsibleLookupError}.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleLookupError  # type: ignore[import-untyped]

PLUGIN = Path(__file__).resolve().parents[2] / "playbooks" / "lookup_plugins" / "bringup_rollout.py"


def _lookup() -> Any:
    spec = importlib.util.spec_from_file_location("bringup_rollout_lookup", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LookupModule()


def main() -> int:
    lookup = _lookup()
    out: list[dict[str, Any]] = []
    for call in json.load(sys.stdin):
        try:
            out.append({"result": lookup.run(call["terms"], call["variables"])})
        except Exception as e:  # the test asserts the lookup's own error class and message
            out.append({"error": str(e), "lookup_error": isinstance(e, AnsibleLookupError)})
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
