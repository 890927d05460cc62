"""Test-wide fixtures."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.state import secret_values
from sim import lifetime
from tests.demo_run import DemoRun, run_demo
from tests.xdist_workers import (
    Isolation,
    group_by_shared_fixtures,
    isolate_worker,
    make_scheduler,
    open_groups_folder,
    prepare_outside_namespaces,
    share_groups,
)

VENV_BIN = Path(sys.executable).parent
ISOLATION = pytest.StashKey[Isolation | None]()
GROUPS = pytest.StashKey[Path | None]()


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker gets a loopback of its own before any test runs; the controller, a folder for the groups
    (tests/xdist_workers.py), after it built what needs the internet. Every pytest process binds what its tests
    start to its own life (sim/lifetime.py)."""
    config.stash[ISOLATION] = isolate_worker(config)
    lifetime.bind_children()  # what any test starts dies with this pytest process, however it dies
    config.stash[GROUPS] = open_groups_folder(config)
    prepare_outside_namespaces(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    isolation = config.stash.get(ISOLATION, None)
    if isolation is not None:
        isolation.close()
    groups = config.stash.get(GROUPS, None)
    if groups is not None:
        shutil.rmtree(groups, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group_by_shared_fixtures(items)
    share_groups(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    return make_scheduler(config, log) if config.stash.get(GROUPS, None) is not None else None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.tools("ibsim", ...)`: the programs are declared dependencies (deps/apt/*.txt, installed by
    `./bringup test` as root; the venv's own scripts): one that is missing is a broken install, said as a
    failure, never hidden as a skip."""
    isolation = item.config.stash.get(ISOLATION, None)
    if isolation is not None:
        isolation.check(item.nodeid)
    for marker in item.iter_markers("tools"):
        missing = [name for name in marker.args if shutil.which(name) is None and not (VENV_BIN / name).exists()]
        if missing:
            pytest.fail(f"missing {', '.join(missing)}: a declared dependency (deps/apt/*.txt or the venv); "
                        "run ./bringup test as root to install it", pytrace=False)


@pytest.fixture(autouse=True)
def _forget_held_secrets() -> Iterator[None]:
    """Credentials a test resolved are held (and masked in output) for the process's life: forget them after
    each test, so one test's password never masks words in another test's output."""
    yield
    secret_values.forget_all()


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The README's main command, run once for the session (see tests/demo_run.py)."""
    return run_demo(tmp_path_factory.mktemp("demo"))
