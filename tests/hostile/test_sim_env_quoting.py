"""`eval "$(python -m sim env)"` with a password holding quotes and `$(...)` runs nothing and keeps the value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]


def test_sim_env_values_are_shell_quoted(tmp_path: Path) -> None:
    site = copy_sim_site(tmp_path / "site")
    marker = tmp_path / "pwned"
    password = f"it's $(touch {marker}) `touch {marker}` \"x\"\nnext line"
    env = {**os.environ, "BRINGUP_SITE": str(site), "BRINGUP_SIM_BMC_PASSWORD": password}
    out = subprocess.run([sys.executable, "-m", "sim", "env"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    shell_env = {"PATH": os.environ["PATH"], "EXPORTS": out.stdout}
    shown = subprocess.run(["bash", "-c", 'eval "$EXPORTS" && printf %s "$BRINGUP_SIM_BMC_PASSWORD"'],
                           env=shell_env, capture_output=True, text=True, timeout=30, check=False)
    assert not marker.exists(), "a password's $(...) ran under eval"
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == password
    stored = site.parent / "state" / "lab" / "secrets.json"
    assert not stored.exists() or password not in stored.read_text(), "a value from the environment is not copied"
