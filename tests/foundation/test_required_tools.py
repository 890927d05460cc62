"""A test that runs a declared dependency (`@pytest.mark.tools`) fails when it is missing, never skips."""

from __future__ import annotations

import pytest

from tests.conftest import pytest_runtest_setup


def test_a_missing_declared_tool_fails_the_test_and_names_it(request: pytest.FixtureRequest) -> None:
    request.node.add_marker(pytest.mark.tools("sh", "no-such-tool-bringup"))
    with pytest.raises(pytest.fail.Exception, match="missing no-such-tool-bringup: a declared dependency"):
        pytest_runtest_setup(request.node)


def test_present_tools_and_the_venvs_own_scripts_pass(request: pytest.FixtureRequest) -> None:
    request.node.add_marker(pytest.mark.tools("sh", "ansible-inventory"))
    pytest_runtest_setup(request.node)
