"""What torchrun says of the worker that ended its run. When a worker exits non-zero, torchrun's elastic agent
raises ChildFailedError and torchrun itself exits 1 whatever the worker's code; the worker's code survives
only in the summary torchrun prints last (torch/distributed/elastic/multiprocessing/errors/__init__.py,
`_MSG_FORMAT_TEMPLATE`): a "Root Cause (first observed failure):" entry whose `exitcode  : N (pid: P)` line
is the first failed worker's code, closed by a border of "=". The error file (TORCHELASTIC_ERROR_FILE) holds
it only for a worker that died of an exception under `@record`, never for one that returned its code.

The host's log is peer text: only its last bytes are read, only the last summary counts (torchrun prints it
after its workers are gone), and a summary cut off or malformed says nothing (unknown).

`python -m training.torchrun_report LOG...` (the Slurm batch script, after a failed step, on its nodes' logs)
prints why a restart cannot work when a log's worker exited with a NO_RETRY code, else nothing."""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Exit codes of `python -m training train` a restart cannot cure: bad arguments, a plan that does not fit.
NO_RETRY = {2: "the arguments or the configuration are wrong", 3: "the memory plan does not fit this world size"}
TORCHRUN_FAILED = 1  # torchrun's own exit when a worker failed (ChildFailedError, uncaught)
TAIL_BYTES = 64 << 10
ROOT_CAUSE = "Root Cause (first observed failure):"
_EXITCODE = re.compile(r"^[ \t]*exitcode[ \t]*:[ \t]*(-?\d{1,3})[ \t]*\(pid:", re.MULTILINE)
_BORDER = re.compile(r"^={20,}\r?$", re.MULTILINE)


def root_cause_exit(text: str) -> int | None:
    """The first failed worker's exit code from the last summary in `text`, None when there is none whole."""
    at = text.rfind(ROOT_CAUSE)
    if at < 0:
        return None
    entry = text[at + len(ROOT_CAUSE):]
    end = _BORDER.search(entry)
    if end is None:
        return None
    codes = _EXITCODE.findall(entry[:end.start()])
    return int(codes[0]) if len(codes) == 1 else None


def tail_since(path: Path, start: int, limit: int = TAIL_BYTES) -> str:
    """At most the last `limit` bytes written to `path` after offset `start`, as text ("" when unreadable)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(start, size - limit))
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def worker_exit(host_code: int, log: Path, start: int) -> int | None:
    """The code of the worker that made a host's torchrun fail, read from what the host's command printed
    after `start`; None when torchrun did not fail that way or its summary cannot be read."""
    if host_code != TORCHRUN_FAILED:
        return None
    return root_cause_exit(tail_since(log, start))


def no_retry_reason(code: int, where: str = "") -> str | None:
    """Why exit `code` (of a host, or of a worker `where` names) is not worth a restart; None when it may be."""
    if code not in NO_RETRY:
        return None
    return f"exit code {code}{where}: {NO_RETRY[code]}; a restart would fail the same way"


def main(argv: list[str] | None = None) -> int:
    for name in sys.argv[1:] if argv is None else argv:
        path = Path(name)
        code = root_cause_exit(tail_since(path, 0))
        why = None if code is None else no_retry_reason(code, f" of a worker ({path.name})")
        if why:
            print(why)
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
