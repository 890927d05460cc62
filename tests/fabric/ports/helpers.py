"""Paths of the port-health fixtures and of the real captures that may not be checked out."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "fabric" / "ports"
IBSIM = FIXTURES / "ibsim"
REALDATA = REPO / ".." / "shared" / "realdata"
LEAF = "0c42a10300000000"  # leaf-A-r3-U40 in the ibsim captures
SPINE = "0c42a10300000080"


def realdata(relative: str) -> str:
    path = REALDATA / relative
    if not path.is_file():
        pytest.skip(f"real capture {relative} not present (../shared/realdata is not checked out here; its "
                    "licence keeps it out of the repository)")
    return path.read_text()
