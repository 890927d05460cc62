"""Every capture a fabric command reads goes through one bounded reader (`fabric/captures.py` over
`provision/site/bounded.py`): a device, a FIFO or a missing file is one error naming the option, never a hang
or an unbounded read, and an event log read whole parses as it did streamed from the file."""

from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path

import pytest

from fabric.captures import CaptureUnreadable, read_capture
from fabric.ports.inputs import read_events
from fabric.ufm.events import UfmEvent, iter_event_log

IBSIM = Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "ports" / "ibsim"


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
