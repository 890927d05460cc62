from __future__ import annotations

import json
import re
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


def as_older_driver_prints_it(text: str) -> str:
    """A current report respelt the way older drivers print theirs (public `nvidia-smi -q` pastes of Tesla V100s
    on 410.48 and 418.67: `Ecc Mode`, `Clocks Throttle Reasons`, `Replays since reset` on 410), with the product
    name without the `NVIDIA ` brand as those drivers print an A100's (`A100-SXM4-40GB`). No capture from such a
    driver under a licence we can use was found, so the values stay those of the real (Apache-2.0) A100 capture
    and only the spellings change."""
    text = text.replace("    ECC Mode\n", "    Ecc Mode\n").replace("Clocks Event Reasons", "Clocks Throttle Reasons")
    text = text.replace("Replays Since Reset", "Replays since reset")
    return re.sub(r"(Product Name\s+: )NVIDIA ", r"\1", text)

