"""Running commands for the test hosts: one place that turns a failed command into an error."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from sim.testhosts.errors import CommandFailed


def run(argv: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float = 900.0, input_text: str | None = None) -> str:
    """Run `argv`; return stdout+stderr, or raise CommandFailed with the tail of the output."""
    done = subprocess.run(argv, cwd=cwd, env=dict(env) if env is not None else None, input=input_text,
                          capture_output=True, text=True, timeout=timeout, check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise CommandFailed(argv, done.returncode, output)
    return output
