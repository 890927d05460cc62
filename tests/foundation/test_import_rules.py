"""The packages' import rules, checked by parsing every module with `ast`: nothing is imported, so a module that
would fail to import is still checked, and lazy imports inside functions count as much as those at the top.

The allow-lists are ARCHITECTURE.md's table "Packages and their rules", read here: each row's folders (backticked
paths; a folder covers every module below it, a file only itself, the most specific row wins) may import their own
folder, the standard library and the modules its "may import" cell names in backticks outside parentheses (and
everything below them; parentheses hold the reasons); "anything" allows all. The table and the test cannot
disagree: a module no row covers, a row naming a folder that is not there and a backticked name that is no module
fail the test. ARCHITECTURE.md also quotes `RULES`, the
never-import rules kept as their own checks because they say why.

`tools/` importing only the standard library is the one rule checked elsewhere, by
tests/tools/test_stdlib_py310.py (which also pins Python 3.10 syntax); its row here names that test.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STDLIB_TEST = REPO / "tests" / "tools" / "test_stdlib_py310.py"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
ROOTS = ("fabric", "provision", "report", "sim", "tools", "training")  # the project's Python packages, which the table binds


@dataclass(frozen=True)
class Rule:
    packages: tuple[str, ...]  # the modules the rule binds: these and everything below them
    never_import: tuple[str, ...]  # modules (and everything below them) they may not import
    why: str
    exempt: tuple[str, ...] = ()  # modules below `packages` the rule does not bind


RULES: tuple[Rule, ...] = (
    Rule(("provision", "fabric", "report", "training", "tools"), ("sim",),
         "product code never knows the simulator: the lab provides what it needs through a site file, "
         "environment variables and endpoints, as a real site does"),
    Rule(("provision.state", "provision.site"), ("provision.cli", "provision.command", "typer", "rich"),
         "the state store and the site model are libraries: the command line uses them, never the reverse"),
    Rule(("fabric",), ("provision.redfish", "provision.maas", "provision.bmc"),
         "the fabric tooling reads captures, designs and the site; it never drives BMCs or MAAS"),
    Rule(("provision.steps",), ("provision.bmc", "provision.maas", "provision.health", "provision.cli", "typer",
                                "rich"),
         "the step runner and table know a step only by its spec and its per-host work: each system's package "
         "plugs its steps into the runner, never the reverse"),
    Rule(("provision",), ("fabric", "report"),
         "dependencies point one way: fabric builds on provision, and the views across both (`report`: the "
         "bring-up report, anomaly evidence) sit above both; of provision only its command line, the top, uses them",
         exempt=("provision.cli",)),
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
            for path in modules_of(rule.packages) if not _within(module_name(path), rule.exempt)
            for line, name in imported_modules(path)
            if _within(name, rule.never_import)]


@pytest.mark.parametrize("rule", RULES, ids=[f"{'+'.join(r.packages)}-never-{'+'.join(r.never_import)}" for r in RULES])
def test_no_package_imports_what_its_rule_forbids(rule: Rule) -> None:
    assert modules_of(rule.packages), f"no module found for {rule.packages}: the rule checks nothing"
    assert violations(rule) == [], rule.why


def test_the_tools_rule_is_checked_by_the_stdlib_test_over_every_tools_module() -> None:
    text = STDLIB_TEST.read_text(encoding="utf-8")
    assert 'TOOLS.rglob("*.py")' in text and "sys.stdlib_module_names" in text, TOOLS_RULE


def _fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: str, modules: dict[str, str]) -> None:
    """A repository holding `package` with `modules` (name -> source) and an empty `__init__.py`, as REPO."""
    (tmp_path / package).mkdir()
    for name, text in {"__init__.py": "", **modules}.items():
        (tmp_path / package / name).write_text(text)
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)


def test_a_lazy_relative_or_from_import_of_a_forbidden_module_is_seen(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_repo(tmp_path, monkeypatch, "fabric", {
        "lazy.py": "def f():\n    from provision import maas\n", "rel.py": "from .. import sim\n",
        "clean.py": "from provision.errors import BringupError\nimport fabric.lazy\n"})
    assert violations(Rule(("fabric",), ("provision.maas", "sim"), "test")) == [
        "fabric/lazy.py:2 imports provision.maas", "fabric/rel.py:1 imports sim"]


def import_cycles(roots: tuple[str, ...] = ROOTS) -> list[list[str]]:
    """Every group of modules that import each other (lazy imports count), each sorted. A module importing its own
    package (`from report import gather_files` in report/build.py) is no cycle: Python runs
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
    _fake_repo(tmp_path, monkeypatch, "fabric", {"a.py": "from fabric.b import f\n",
                                                 "b.py": "def f():\n    from fabric import a\n",
                                                 "c.py": "from fabric import b\nimport fabric\n"})
    assert import_cycles(("fabric",)) == [["fabric.a", "fabric.b"]]


@dataclass(frozen=True)
class Place:
    module: str  # a folder's package or a file's module
    exact: bool  # a file: only that module; a folder: it and everything below

    def holds(self, module: str) -> bool:
        return module == self.module or (not self.exact and module.startswith(self.module + "."))


@dataclass(frozen=True)
class TableRow:
    folder: str  # the row's folder cell, as written
    places: tuple[Place, ...]
    may_import: tuple[str, ...] | None  # None: anything


TABLE_HEADING = "## Packages and their rules"
_CELL = re.compile(r"(?<!\\)\|")
_TICKED = re.compile(r"`([^`]+)`")
_ASIDE = re.compile(r"\([^()]*\)")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _place(token: str) -> Place:
    if token.endswith(".py"):
        parts = token[: -len(".py")].split("/")
        return Place(".".join(parts[:-1] if parts[-1] == "__init__" else parts), True)
    return Place(token.strip("/").replace("/", "."), False)


def table_rows(text: str) -> list[TableRow]:
    """The rows of ARCHITECTURE.md's package table (columns: folder, holds, may import)."""
    lines = text.split(TABLE_HEADING, 1)[1].strip().splitlines()
    table = [line for line in lines[: next((i for i, line in enumerate(lines) if not line.startswith("|")),
                                            len(lines))]]
    rows = []
    for line in table[2:]:  # past the header and its rule
        folder, _holds, may = (cell.strip() for cell in _CELL.split(line.strip())[1:-1])
        reasons_out = may
        while _ASIDE.search(reasons_out):
            reasons_out = _ASIDE.sub("", reasons_out)
        names = _TICKED.findall(reasons_out)
        bad = [n for n in names if not _MODULE.fullmatch(n)]
        assert not bad, f"ARCHITECTURE.md row {folder}: may-import names {bad} are not module names"
        rows.append(TableRow(folder, tuple(_place(t) for t in _TICKED.findall(folder)),
                             None if may.startswith("anything") else tuple(names)))
    return rows


def architecture_rows() -> list[TableRow]:
    """The table's rows that bind the project's Python packages (roles, playbooks and inventory are Ansible's)."""
    return [r for r in table_rows(ARCHITECTURE.read_text(encoding="utf-8"))
            if any(p.module.split(".")[0] in ROOTS for p in r.places)]


def _exists(module: str) -> bool:
    path = REPO.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (
        path.is_dir() and any(path.glob("*.py")))


def table_problems(rows: list[TableRow], roots: tuple[str, ...] = ROOTS) -> list[str]:
    """Names in the table that are not there: a place, or a first-party module a row allows."""
    missing = [f"{r.folder}: {p.module}" for r in rows for p in r.places if not _exists(p.module)]
    missing += [f"{r.folder} may import {n}" for r in rows for n in r.may_import or ()
                if n.split(".")[0] in roots and not _exists(n)]
    return missing


def _allows(name: str, allowed: tuple[str, ...]) -> bool:
    """`name` is allowed, or is a package above an allowed module (importing it runs only that `__init__`)."""
    return _within(name, allowed) or any(a.startswith(name + ".") for a in allowed)


def table_violations(rows: list[TableRow], roots: tuple[str, ...] = ROOTS) -> list[str]:
    """`file:line imports module` for each import of a non-standard-library module its table row does not allow,
    and each module no row covers."""
    out = []
    for path in (p for root in roots for p in sorted((REPO / root).rglob("*.py"))):
        module = module_name(path)
        covering = [(p, r) for r in rows for p in r.places if p.holds(module)]
        if not covering:
            out.append(f"{path.relative_to(REPO)}: no row of the table covers {module}")
            continue
        place, row = max(covering, key=lambda pr: (len(pr[0].module), pr[0].exact))
        if row.may_import is None:
            continue
        allowed = (place.module, *row.may_import)
        out.extend(f"{path.relative_to(REPO)}:{line} imports {name}, which its row ({row.folder}) does not allow"
                   for line, name in imported_modules(path)
                   if name.split(".")[0] not in sys.stdlib_module_names and not _allows(name, allowed))
    return out


def test_every_module_imports_only_what_its_architecture_row_allows() -> None:
    rows = architecture_rows()
    assert rows and table_problems(rows) == []
    assert table_violations(rows) == [], "import it through what the row allows, or change the row with the reason"


def test_the_table_binds_a_module_by_its_most_specific_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_repo(tmp_path, monkeypatch, "pkg", {"low.py": "import yaml\nfrom pkg.high import x\n",
                                              "high.py": "import json\nfrom pkg import low\nimport yaml\n",
                                              "free.py": "import anything_at_all\n"})
    table = TABLE_HEADING + """

| folder | holds | may import |
|---|---|---|
| `pkg/` | the package | `yaml` |
| `pkg/high.py`, `pkg/__init__.py` | the top | `pkg.low` (why: `--an-option`, `yaml`), prose without ticks |
| `pkg/free.py` | the free one | anything |
"""
    rows = table_rows(table)
    assert rows[1].places == (Place("pkg.high", True), Place("pkg", True)) and rows[2].may_import is None
    # low.py takes yaml from its folder's row; high.py may not, its own row being the more specific one
    assert table_violations(rows, ("pkg",)) == [
        "pkg/high.py:3 imports yaml, which its row (`pkg/high.py`, `pkg/__init__.py`) does not allow"]
    assert table_problems(table_rows(table.replace("`pkg.low`", "`pkg.gone`")), ("pkg",)) == ["`pkg/high.py`, "
                                                                                   "`pkg/__init__.py` may import pkg.gone"]


def private_imports(roots: tuple[str, ...] = ROOTS) -> list[str]:
    """`file:line uses module._name` for each private name (one underscore) a module takes from another of the
    project's modules, by `from m import _name` or as an attribute of a module it imported."""
    out: list[str] = []
    for path in (p for root in roots for p in sorted((REPO / root).rglob("*.py"))):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                package = _package(path)
                source = _join(".".join(package[: len(package) - node.level + 1]) if node.level else "", node.module)
                if source.split(".")[0] in roots:
                    out.extend(f"{path.relative_to(REPO)}:{node.lineno} uses {source}.{a.name}" for a in node.names
                               if _private(a.name))
                    bound.update((a.asname or a.name, _join(source, a.name)) for a in node.names)
            elif isinstance(node, ast.Import):
                bound.update((a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                             for a in node.names if a.name.split(".")[0] in roots)
        out.extend(f"{path.relative_to(REPO)}:{node.lineno} uses {bound[node.value.id]}.{node.attr}"
                   for node in ast.walk(tree) if isinstance(node, ast.Attribute) and _private(node.attr)
                   and isinstance(node.value, ast.Name) and node.value.id in bound)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_uses_another_modules_private_names() -> None:
    """A leading underscore says "only this module relies on it": a name another module needs is made public
    (and named for what it is), so changing a private one never breaks a module that is not looking."""
    assert private_imports() == []


def test_a_private_name_taken_by_from_import_or_attribute_is_seen(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_repo(tmp_path, monkeypatch, "fabric", {
        "a.py": "_x = 1\n__all__ = ['y']\ny = _x\n",
        "b.py": "from .a import _x, __all__, y\nimport fabric.a as m\nimport fabric\nm._x, fabric.a, self._z\n"})
    assert private_imports(("fabric",)) == ["fabric/b.py:1 uses fabric.a._x", "fabric/b.py:4 uses fabric.a._x"]
