"""Product code does not know the simulator by name either (the import rule only catches `import sim`): no
file of provision, fabric, training or tools mentions ibsim, its client notice (`sim_connect`) or a
simulator state option. The lab reaches the product as a real site's tools do: it announces their prefix,
environment and attachment points (`fabric/diags.py`) and the product runs them through one runner
(`fabric/toolrun.py`)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("provision", "fabric", "report", "training", "tools")
SIMULATOR_WORDS = re.compile(r"ibsim|sim_connect|sim[-_]state|umad2sim", re.IGNORECASE)


def product_files() -> list[Path]:
    return sorted(p for pkg in PRODUCT for p in (REPO / pkg).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def mentions(path: Path) -> list[str]:
    return mentions_in(path, REPO)


def mentions_in(path: Path, root: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # a binary file (none today) says nothing a reader could follow
        return []
    return [f"{path.relative_to(root)}:{no}: {line.strip()}" for no, line in enumerate(text.splitlines(), 1)
            if SIMULATOR_WORDS.search(line)]


def test_no_product_file_names_the_simulator() -> None:
    files = product_files()
    assert any(p.name == "toolrun.py" for p in files)  # the scan sees the product's files
    found = [hit for p in files for hit in mentions(p)]
    assert found == []


def test_the_scan_catches_a_simulator_mention(tmp_path: Path) -> None:
    sample = REPO / "fabric" / "live.py"
    planted = tmp_path / "live.py"
    planted.write_text(sample.read_text(encoding="utf-8") + '\nSTATE = "BRINGUP_IBSIM_STATE"\n', encoding="utf-8")
    [hit] = mentions_in(planted, tmp_path)
    assert hit.endswith('STATE = "BRINGUP_IBSIM_STATE"') and hit.startswith("live.py:")
    assert mentions(sample) == []
