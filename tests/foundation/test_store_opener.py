"""Every command opens the state store one way (provision/site/store.py): a store of another site is refused
and a mistyped directory is never created. Product code that constructs `StateStore` itself skips both."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from provision.errors import BringupError
from provision.site.store import open_store_at

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("provision", "fabric", "report", "training", "tools")
OPENERS = {Path("provision/site/store.py")}


def _constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == "StateStore" or getattr(node.func, "attr", None) == "StateStore")]


def test_only_the_store_opener_constructs_the_state_store_in_product_code() -> None:
    found = []
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO)
            if rel in OPENERS or rel.parts[:2] == ("provision", "state"):
                continue
            found += [f"{rel}:{line}" for line in _constructions(path)]
    assert found == [], f"open the store through provision/site/store.py, not StateStore(...): {found}"


def test_the_check_sees_a_construction_through_a_module_attribute(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import provision.state as s\nstore = s.StateStore('x.db')\n", encoding="utf-8")
    assert _constructions(module) == [2]


def test_a_store_named_by_path_alone_must_exist_and_nothing_is_created(tmp_path: Path) -> None:
    typo = tmp_path / "stat" / "site.db"
    with pytest.raises(BringupError, match="no state database"):
        open_store_at(typo)
    assert not typo.parent.exists()
