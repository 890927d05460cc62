from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.health.config import Expectations, parse_config

REPO = Path(__file__).resolve().parents[2]
REALDATA = REPO / ".." / "shared" / "realdata"
SMI = REALDATA / "4_nvidia_smi"
H200_CAPTURE = SMI / "h200x2-captured-2026-11-29"
FIXTURES = REPO / "tests" / "fixtures"
REPLAY = FIXTURES / "tools" / "replay"
H200 = FIXTURES / "h200"


def realdata(name: str) -> str:
    """A capture from ../shared/realdata, minus the '# rc=N' trailer the project's capture script appends."""
    path = SMI / name
    if not path.is_file():
        pytest.skip(f"{path} absent (../shared/realdata is not checked out here)")
    text = path.read_text(encoding="utf-8")
    head, sep, tail = text.rpartition("\n# rc=")
    return head + "\n" if sep and tail.strip().isdigit() else text


def expectations(name: str = "expectations-h200x2.json", **overrides: dict[str, object]) -> Expectations:
    data = json.loads((REPLAY / name).read_text(encoding="utf-8"))
    for section, values in overrides.items():
        data[section] = {**data.get(section, {}), **values}
    return parse_config(data)


def replay_text(variant: str, probe: str) -> str:
    return (REPLAY / variant / f"{probe}.out").read_text(encoding="utf-8")
