"""A simulated host answers as the health agent exactly the commands the controller builds to run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.health.agent_command import LEVELS, agent_command
from sim.sshhosts.agent_invocation import AGENT_PROGRAM, agent_level

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("level", LEVELS)
def test_the_controllers_agent_command_is_recognised_with_its_level(level: str) -> None:
    assert agent_level(agent_command(level)) == level
    assert agent_level(agent_command(level, AGENT_PROGRAM)) == level


def test_other_commands_are_not_the_agent() -> None:
    assert agent_level(agent_command("fast", "/opt/other/agent")) is None
    assert agent_level("nvidia-smi -q -x") is None
    assert agent_level(agent_command("fast")[:-1]) is None
    assert agent_level(agent_command("fast").replace("--level fast", "--level slow")) is None


def test_the_product_keeps_no_parser_that_only_the_simulator_needs() -> None:
    source = (REPO / "provision" / "health" / "agent_command.py").read_text(encoding="utf-8")
    assert "def parse_agent_command" not in source and "re.compile" not in source
