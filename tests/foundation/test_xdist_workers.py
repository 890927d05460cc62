"""The suite's xdist workers (tests/xdist_workers.py): each has a loopback of its own, and the tests sharing a
broad fixture run on one worker."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.xdist_workers import group_by_shared_fixtures

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import socket, sys
from tests.xdist_workers import enter_private_network
enter_private_network()
port = int(sys.argv[1])
probe = socket.socket()
print("refused" if probe.connect_ex(("127.0.0.1", port)) else "reached")
mine = socket.socket()
mine.bind(("127.0.0.1", port))  # the same address and port as the listener outside: free in here
mine.listen()
print("bound")
"""


def test_a_worker_network_is_a_loopback_of_its_own() -> None:
    with socket.socket() as outside:
        outside.bind(("127.0.0.1", 0))
        outside.listen()
        port = outside.getsockname()[1]
        done = subprocess.run([sys.executable, "-c", CHILD, str(port)], cwd=REPO, capture_output=True, text=True,
                              timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "bound"]


def shared_lab() -> None: ...  # stand-ins for fixture functions: defined under tests/, as the suite's are


def module_corpus() -> None: ...


@dataclass
class FixtureDef:
    scope: str
    baseid: str
    func: Any


@dataclass
class FixtureInfo:
    name2fixturedefs: dict[str, list[FixtureDef]]


@dataclass
class Item:
    nodeid: str
    _fixtureinfo: FixtureInfo
    marks: list[pytest.MarkDecorator] = field(default_factory=list)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark)

    def group(self) -> str | None:
        return str(self.marks[0].args[0]) if self.marks else None


def _item(nodeid: str, **fixtures: FixtureDef) -> Item:
    return Item(nodeid, FixtureInfo({name: [d] for name, d in fixtures.items()}))


def test_tests_sharing_a_broad_fixture_instance_are_one_group_and_others_none() -> None:
    lab = FixtureDef("session", "tests", shared_lab)
    corpus = FixtureDef("module", "tests/a", module_corpus)
    own = FixtureDef("function", "tests", shared_lab)
    pytests = FixtureDef("session", "", subprocess.run)  # not the project's: never a reason to group
    items = [
        _item("tests/a/test_x.py::one", lab=lab),
        _item("tests/a/test_y.py::two", corpus=corpus),
        _item("tests/a/test_y.py::three", corpus=corpus, lab=lab),  # joins the two groups
        _item("tests/a/test_z.py::four", corpus=corpus),  # another module: another instance of corpus
        _item("tests/a/test_z.py::five", tmp=own, factory=pytests),
    ]
    group_by_shared_fixtures(items)  # type: ignore[arg-type]
    groups = [item.group() for item in items]
    assert groups[0] is not None and groups[0] == groups[1] == groups[2]
    assert groups[3] is not None and groups[3] != groups[0]
    assert groups[4] is None


def test_a_module_fixtures_tests_run_on_one_worker_under_two() -> None:
    """End to end, as ./bringup test runs it: xdist's own loadgroup no longer groups under pytest 9."""
    target = "tests/health/test_expectations_schema.py"  # 13 tests share its module-scoped `sites`
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                           "-v", target, "-k", "render_the_same_expectations"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = {line.split("]", 1)[0] for line in done.stdout.splitlines() if "PASSED" in line and target in line}
    assert len(workers) == 1, done.stdout[-2000:]
