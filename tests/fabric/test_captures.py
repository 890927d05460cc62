"""Every capture a fabric command reads goes through one bounded reader (`fabric/captures.py` over
`provision/site/bounded.py`): a device, a FIFO or a missing file is one error naming the option, never a hang
or an unbounded read, and an event log read whole parses as it did streamed from the file."""

from __future__ import annotations

import os
import re
from datetime import UTC
from pathlib import Path

import pytest

from fabric.captures import CaptureUnreadable, read_capture
from fabric.ports.inputs import read_events
from fabric.ufm.events import UfmEvent, iter_event_log

REPO = Path(__file__).resolve().parents[2]
IBSIM = REPO / "tests" / "fixtures" / "fabric" / "ports" / "ibsim"
READS_A_FILE = re.compile(r"\.read_text\(|\.read_bytes\(|(?<![\w.])open\(|\.open\(")
ALLOWED = {
    "fabric/captures.py": "the reader itself",
    "fabric/live.py": "sysfs attributes of the local HCAs (the kernel's, a few bytes each)",
    "fabric/ports/site_run.py": "the ports lock file: opened to lock, never read",
}


def test_a_device_a_fifo_and_a_missing_file_are_refused_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(CaptureUnreadable, match="--events /dev/zero is a character device"):
        read_capture(Path("/dev/zero"), "--events")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CaptureUnreadable, match=r"--discovered .*fifo is a pipe \(FIFO\)"):
        read_capture(fifo, "--discovered")
    with pytest.raises(CaptureUnreadable, match=r"--routing .*missing: cannot read"):
        read_capture(tmp_path / "missing", "--routing")


def test_events_read_through_the_bounded_reader_parse_as_the_file_streamed(tmp_path: Path) -> None:
    with (IBSIM / "event.log").open() as f:
        streamed = [e for e in iter_event_log(f, "event.log", UTC) if isinstance(e, UfmEvent)]
    crlf = tmp_path / "event.log"
    crlf.write_bytes((IBSIM / "event.log").read_bytes().replace(b"\n", b"\r\n"))  # a log copied off Windows
    read = [e for e in read_events([crlf], UTC) if isinstance(e, UfmEvent)]
    assert streamed and [e._replace(source="") for e in read] == [e._replace(source="") for e in streamed]
    with pytest.raises(CaptureUnreadable, match="--events /dev/zero"):
        list(read_events([Path("/dev/zero")], UTC))


def test_no_fabric_module_reads_a_file_but_through_the_bounded_reader() -> None:
    found = [f"{rel}:{no}: {line.strip()}" for path in sorted((REPO / "fabric").rglob("*.py"))
             if (rel := path.relative_to(REPO).as_posix()) not in ALLOWED
             for no, line in enumerate(path.read_text().splitlines(), 1) if READS_A_FILE.search(line)]
    assert not found, "read it with fabric.captures.read_capture instead:\n" + "\n".join(found)
