"""A module path that a docstring, a comment or ARCHITECTURE.md names is a file that exists: a newcomer follows
these to find the code, and a rename that leaves them behind sends them nowhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("provision", "fabric", "report", "sim", "tools", "training")
MENTION = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")/[\w/]*\w\.py)\b")


def _documents() -> list[Path]:
    found = [REPO / "ARCHITECTURE.md", REPO / "README.md"]
    return found + sorted(p for top in PACKAGES for p in (REPO / top).rglob("*.py"))


def test_every_module_path_named_in_the_code_and_architecture_exists() -> None:
    missing = [f"{doc.relative_to(REPO)}:{no}: {m.group(1)}"
               for doc in _documents() if doc.exists()
               for no, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
               for m in MENTION.finditer(line) if not (REPO / m.group(1)).is_file()]
    assert not missing, "these name files that do not exist:\n" + "\n".join(missing)
