"""The command line the controller sends to a host to run the node-side health agent (`tools/health`).

The agent reads its expectations from a file; the controller sends them on the command's standard
input, and a small POSIX shell wrapper puts them in a temporary file for the agent (reading
/dev/stdin directly fails where sshd hands the command a socket rather than a pipe). `$BRINGUP_HEALTH_AGENT`
replaces how the agent is started (default `python3 -m tools.health`, with `tools` importable on the
host, which the health_agent role arranges).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_AGENT = "BRINGUP_HEALTH_AGENT"
DEFAULT_AGENT = "python3 -m tools.health"
LEVELS = ("fast", "long", "all")

_WRAPPER = (
    'cfg=$(mktemp) && cat >"$cfg" && {{ {agent} --config "$cfg" --level {level} --json; '
    'rc=$?; rm -f "$cfg"; exit $rc; }}'
)


def agent_program(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(ENV_AGENT) or DEFAULT_AGENT


def agent_command(level: str, agent: str = DEFAULT_AGENT) -> str:
    if level not in LEVELS:
        raise ValueError(f"unknown health level {level!r} (levels: {', '.join(LEVELS)})")
    return _WRAPPER.format(agent=agent, level=level)
