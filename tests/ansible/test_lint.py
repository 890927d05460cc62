"""ansible-lint, production profile, over the roles, the playbooks and the group variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "ansible-lint"


@pytest.mark.slow
@pytest.mark.skipif(not LINT.exists(), reason="ansible-lint is not installed in the venv (deps/python/ansible.txt)")
def test_ansible_lint_production_profile_is_clean() -> None:
    env = {**os.environ, "PATH": f"{LINT.parent}:{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    done = subprocess.run([str(LINT), "--profile", "production", "--offline", "site.yml", "roles", "playbooks",
                           "inventory/group_vars"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "Profile 'production' was required, and it passed" in done.stdout + done.stderr
