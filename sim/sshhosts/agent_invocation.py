"""Which commands a simulated host answers as the health agent: exactly those the controller sends.

The controller builds the command with `provision.health.agent_command.agent_command`; a simulated
host recognises it by building the same command for each level, so the wrapper's format is written
only once, in the product.
"""

from __future__ import annotations

from provision.health.agent_command import DEFAULT_AGENT, LEVELS, agent_command

AGENT_PROGRAM = DEFAULT_AGENT  # how the controller starts the agent unless $BRINGUP_HEALTH_AGENT says otherwise


def agent_level(command: str, agent: str = AGENT_PROGRAM) -> str | None:
    """The health level of `command` when it is the controller's command for running `agent`; else None."""
    return next((level for level in LEVELS if command == agent_command(level, agent)), None)
