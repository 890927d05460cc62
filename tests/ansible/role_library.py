"""Load a role's Ansible module (roles/<role>/library/<name>.py) as a Python module, for unit tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load(role: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "roles" / role / "library" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
