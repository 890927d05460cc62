"""Each host's replay directory: its fixture set as is, or a copy with the host's tool faults applied."""

from __future__ import annotations

import shutil
from pathlib import Path

from sim.sshhosts.faults import Faults, ToolFault


def _garble(data: bytes) -> bytes:
    # Deterministic noise: every line's bytes reversed and the middle third replaced with binary junk.
    lines = [line[::-1] for line in data.splitlines(keepends=False)]
    text = b"\n".join(lines)
    third = len(text) // 3
    return text[:third] + bytes(range(128, 256))[: max(1, third)] + text[2 * third :]


def apply_tool_fault(directory: Path, probe: str, fault: ToolFault) -> None:
    out = directory / f"{probe}.out"
    rc = directory / f"{probe}.rc"
    data = out.read_bytes() if out.is_file() else b""
    if fault is ToolFault.missing:
        out.unlink(missing_ok=True)
        rc.unlink(missing_ok=True)
    elif fault is ToolFault.empty:
        out.write_bytes(b"")
    elif fault is ToolFault.truncate:
        out.write_bytes(data[: len(data) * 2 // 5])
    elif fault is ToolFault.garble:
        out.write_bytes(_garble(data))
    elif fault is ToolFault.hang:
        rc.write_text("timeout\n", encoding="utf-8")


def replay_dir(faults: Faults, host: str, work: Path) -> Path:
    """The directory the agent replays for `host`; a per-host copy under `work` only when a tool is faulty."""
    source = faults.fixture_dir(host)
    tools = faults.for_host(host).tools
    if not tools:
        return source
    target = work / host
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    for probe, fault in sorted(tools.items()):
        apply_tool_fault(target, probe, fault)
    return target
