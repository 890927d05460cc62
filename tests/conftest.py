"""Test-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provision.state import secret_values


@pytest.fixture(autouse=True)
def _forget_held_secrets() -> Iterator[None]:
    """Credentials a test resolved are held (and masked in output) for the process's life: forget them after
    each test, so one test's password never masks words in another test's output."""
    yield
    secret_values.forget_all()
