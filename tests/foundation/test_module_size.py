"""Every Python module of the project (product, roles' plugins and modules, simulator, benchmarks, tests) stays
under 400 lines: a longer one holds more than one thing its name can say."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 400


def test_no_python_module_is_over_400_lines() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=REPO, capture_output=True, check=True,
                             timeout=60).stdout.decode().split("\0")
    long = {name: n for name in tracked if name and (REPO / name).is_file()
            and (n := len((REPO / name).read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert long == {}, f"split these modules (lines): {long}"
