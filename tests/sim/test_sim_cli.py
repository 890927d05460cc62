"""`python -m sim` commands on the embedded site, run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.sites import copy_sim_site

REPO = Path(__file__).resolve().parents[2]


def _sim(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_env_prints_exports_and_status_answers(tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    copy_sim_site(site_dir)
    env = {**os.environ, "BRINGUP_SITE": str(site_dir / "site.yml")}
    env.pop("BRINGUP_SIM_BMC_PASSWORD", None)
    out = _sim("env", env=env)
    assert out.returncode == 0, out.stderr
    assert "export BRINGUP_SIM_BMC_PASSWORD=" in out.stdout
    secrets = site_dir / "state" / "lab" / "secrets.json"
    assert secrets.stat().st_mode & 0o777 == 0o600
    again = _sim("env", env=env)
    assert again.stdout == out.stdout, "the lab's credentials are stable between commands"
    assert _sim("status", "--json", env=env).returncode == 0


def test_bad_site_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "site.yml"
    bad.write_text("name: [oops\n")
    out = _sim("status", "--site", str(bad), env=dict(os.environ))
    assert out.returncode == 1
    assert "not valid YAML" in out.stderr and "Traceback" not in out.stderr
