"""tools/ runs on the hosts' system Python (>= 3.10) with nothing installed: every module parses as
Python 3.10 and imports only the standard library and tools itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
MODULES = sorted(TOOLS.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(TOOLS)) for p in MODULES])
def test_each_module_is_python_3_10_and_stdlib_only(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 10))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    foreign = sorted(imported - set(sys.stdlib_module_names) - {"tools", "__future__"})
    assert foreign == [], f"{path.name} imports {foreign}"
