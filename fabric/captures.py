"""Capture files as every fabric command reads them: ibnetdiscover and iblinkinfo output, LFT dumps, counter
sweeps, UFM's JSON and event logs, burn-in judgements. Each goes through `provision/site/bounded.py` (regular
files only, at most `MAX_CAPTURE_BYTES`), so `/dev/zero`, a FIFO or a runaway log is one clear error naming
the file, never a hang or an out-of-memory kill; text is UTF-8 with undecodable bytes replaced (a peer's
output may hold anything)."""

from __future__ import annotations

from pathlib import Path

from fabric.errors import FabricError
from provision.site.bounded import MAX_CAPTURE_BYTES, InputRefused, read_bytes


class CaptureUnreadable(FabricError):
    """A capture file that is missing, not a regular file, or over the bound."""


def read_capture_bytes(path: Path, what: str = "capture") -> bytes:
    """The file's bytes; `what` names it in the error (an option such as `--routing`, or "capture")."""
    try:
        return read_bytes(path, limit=MAX_CAPTURE_BYTES, what=what)
    except InputRefused as e:
        raise CaptureUnreadable(str(e)) from None
    except OSError as e:
        raise CaptureUnreadable(f"{what} {path}: cannot read: {e.strerror or e}") from None


def read_capture(path: Path, what: str = "capture") -> str:
    """The file as text (undecodable bytes replaced)."""
    return read_capture_bytes(path, what).decode("utf-8", errors="replace")
