"""Run an infiniband-diags tool (`ibnetdiscover`, `iblinkinfo`, `ibaddr`) in a scratch directory.

Under ibsim the tools run with umad2sim preloaded, which builds a fake sysfs in `./sys-<pid>` of the
working directory and removes it only when the tool exits normally: a tool killed at its timeout
would leave that directory behind in whatever directory the caller ran from (a repository checkout,
an operator's home). Each run gets its own temporary directory, removed afterwards with whatever the
tool left in it. Real tools on real HCAs write nothing there; the cost is one mkdir.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping


def run_tool(argv: list[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """`argv` with `env` added to ours, its output captured as text; raises FileNotFoundError and
    subprocess.TimeoutExpired as subprocess.run does (the tool is killed at the timeout)."""
    with tempfile.TemporaryDirectory(prefix="ibtool-") as scratch:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              cwd=scratch, env={**os.environ, **env})
