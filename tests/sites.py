"""Copies of the shipped sites for tests that write state next to the site file."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def copy_sim_site(target: Path) -> Path:
    """The embedded site with everything it references (cabling design, simulator configs), no state."""
    shutil.copytree(REPO / "inventory" / "sim", target, ignore=shutil.ignore_patterns("state"), dirs_exist_ok=True)
    faults = target / "health-faults.yml"
    replay = REPO / "tests" / "fixtures" / "tools" / "replay"
    faults.write_text(faults.read_text().replace("fixture_root: ../../tests/fixtures/tools/replay", f"fixture_root: {replay}"))
    return target / "site.yml"
