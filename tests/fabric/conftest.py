from __future__ import annotations

from pathlib import Path

import pytest

from fabric.design import Design, load_design

REPO = Path(__file__).resolve().parents[2]
REALDATA = REPO / ".." / "shared" / "realdata" / "1_infiniband"
FIXTURES = REPO / "tests" / "fixtures" / "fabric"
SIM_DESIGN = REPO / "inventory" / "sim" / "fabric" / "design.yml"


def realdata_text(name: str) -> str:
    path = REALDATA / name
    if not path.is_file():
        pytest.skip(f"real capture {name} not present (../shared/realdata is not checked out here)")
    return path.read_text(encoding="utf-8", errors="replace")


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def sim_design() -> Design:
    return load_design(SIM_DESIGN)
