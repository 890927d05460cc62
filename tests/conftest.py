"""Test-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provision.state import secret_values
from tests.demo_run import DemoRun, run_demo


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
