"""The packages' import rules (ARCHITECTURE.md quotes `RULES`), checked by parsing every module with `ast`:
nothing is imported, so a module that would fail to import is still checked, and lazy imports inside
functions count as much as those at the top.

`tools/` importing only the standard library is the one rule checked elsewhere, by
tests/tools/test_stdlib_py310.py (which also pins Python 3.10 syntax); its row here names that test.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STDLIB_TEST = REPO / "tests" / "tools" / "test_stdlib_py310.py"


@dataclass(frozen=True)
class Rule:
    packages: tuple[str, ...]  # the modules the rule binds: these and everything below them
    never_import: tuple[str, ...]  # modules (and everything below them) they may not import
    why: str


RULES: tuple[Rule, ...] = (
    Rule(("provision", "fabric", "training", "tools"), ("sim",),
         "product code never knows the simulator: the lab provides what it needs through a site file, "
         "environment variables and endpoints, as a real site does"),
    Rule(("provision.state", "provision.site"), ("provision.cli", "typer", "rich"),
         "the state store and the site model are libraries: the command line uses them, never the reverse"),
    Rule(("fabric",), ("provision.redfish", "provision.maas", "provision.bmc"),
         "the fabric tooling reads captures, designs and the site; it never drives BMCs or MAAS"),
    Rule(("provision.steps",), ("provision.bmc", "provision.maas", "provision.health", "provision.cli", "typer",
                                "rich"),
         "the step runner and table know a step only by its spec and its per-host work: each system's package "
         "plugs its steps into the runner, never the reverse"),
)
TOOLS_RULE = "tools imports only the standard library (and tools): checked by " + str(STDLIB_TEST.relative_to(REPO))


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(path: Path) -> list[str]:
    """The package a module's relative imports start from: itself for an `__init__.py`, else its parent."""
    parts = module_name(path).split(".")
    return parts if path.name == "__init__.py" else parts[:-1]


def _join(*names: str | None) -> str:
    return ".".join(n for n in names if n)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file; `from a import b` gives both `a` and `a.b` (b may be a module)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = _package(path)
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            source = _join(base, node.module)
            if source:
                found.append((node.lineno, source))
            found.extend((node.lineno, _join(source, alias.name)) for alias in node.names if alias.name != "*")
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def modules_of(packages: tuple[str, ...]) -> list[Path]:
    roots = {p.split(".")[0] for p in packages}
    paths = (path for root in sorted(roots) for path in (REPO / root).rglob("*.py"))
    return sorted(path for path in paths if _within(module_name(path), packages))


def violations(rule: Rule) -> list[str]:
    """`file:line imports module` for each import that breaks `rule`."""
    return [f"{path.relative_to(REPO)}:{line} imports {name}"
            for path in modules_of(rule.packages)
            for line, name in imported_modules(path)
            if _within(name, rule.never_import)]


@pytest.mark.parametrize("rule", RULES, ids=[f"{'+'.join(r.packages)}-never-{'+'.join(r.never_import)}" for r in RULES])
def test_no_package_imports_what_its_rule_forbids(rule: Rule) -> None:
    assert modules_of(rule.packages), f"no module found for {rule.packages}: the rule checks nothing"
    assert violations(rule) == [], rule.why


def test_the_tools_rule_is_checked_by_the_stdlib_test_over_every_tools_module() -> None:
    text = STDLIB_TEST.read_text(encoding="utf-8")
    assert 'TOOLS.rglob("*.py")' in text and "sys.stdlib_module_names" in text, TOOLS_RULE


def test_a_lazy_relative_or_from_import_of_a_forbidden_module_is_seen(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fabric"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "lazy.py").write_text("def f():\n    from provision import maas\n")
    (package / "rel.py").write_text("from .. import sim\n")
    (package / "clean.py").write_text("from provision.errors import BringupError\nimport fabric.lazy\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert violations(Rule(("fabric",), ("provision.maas", "sim"), "test")) == [
        "fabric/lazy.py:2 imports provision.maas", "fabric/rel.py:1 imports sim"]


def import_cycles(roots: tuple[str, ...] = ("provision", "fabric", "sim", "tools", "training")) -> list[list[str]]:
    """Every group of modules that import each other (lazy imports count), each sorted. A module importing its own
    package (`from provision.report import gather_files` in provision/report/build.py) is no cycle: Python runs
    the package's `__init__` first in any case."""
    import networkx as nx

    paths = {module_name(p): p for root in roots for p in (REPO / root).rglob("*.py")}
    graph: nx.DiGraph[str] = nx.DiGraph()
    for name, path in paths.items():
        for _line, imported in imported_modules(path):
            if imported in paths and imported != name and not name.startswith(imported + "."):
                graph.add_edge(name, imported)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_no_modules_import_each_other() -> None:
    """A cycle makes import order matter and hides which module is the library and which its user: split out
    what both need, or move the user's part to the user."""
    assert import_cycles() == []


def test_a_lazy_import_back_is_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fabric"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from fabric.b import f\n")
    (package / "b.py").write_text("def f():\n    from fabric import a\n")
    (package / "c.py").write_text("from fabric import b\nimport fabric\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert import_cycles(("fabric",)) == [["fabric.a", "fabric.b"]]
