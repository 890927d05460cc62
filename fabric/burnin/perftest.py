"""`ib_write_bw` (perftest): the command lines the runner starts, and a pure parser of what it prints.

Server (the flow's receiver, started first): `ib_write_bw -d <hca> -i <port> -p <tcp port> --report_gbits
-D <s> [--use_cuda=<gpu>]`; client (the sender): the same with the server's address last. Data moves
from client to server. Both print a banner, the QP addresses, then one result row under
` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]` (captures in
realdata/5_perf). A result is only read from that row; anything else (an early exit, no row, a row that
is not numbers, a device other than the one asked for) is `BwUnknown` with the reason, never a rate.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

BASE_TCP_PORT = 18515  # perftest's default port; a stage's flows use consecutive ports from here
MAX_OUTPUT = 64 * 1024  # a perftest report is ~3 KB; more is a runaway

_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[Gb/sec\]\s+BW average\[Gb/sec\]\s+MsgRate\[Mpps\]\s*$")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s*$")
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")


@dataclass(frozen=True, slots=True)
class BwResult:
    gbps: float  # BW average, Gb/s
    peak_gbps: float
    msg_bytes: int
    iterations: int
    device: str | None


@dataclass(frozen=True, slots=True)
class BwUnknown:
    reason: str


def server_command(hca: str, ib_port: int, tcp_port: int, duration_s: int, gpu: int | None,
                   deadline_s: int) -> str:
    """The receiver's command; `timeout` bounds it on the host even if the SSH session is lost."""
    return _wrap(_argv(hca, ib_port, tcp_port, duration_s, gpu), deadline_s)


def client_command(hca: str, ib_port: int, tcp_port: int, duration_s: int, gpu: int | None, server: str,
                   deadline_s: int) -> str:
    return _wrap([*_argv(hca, ib_port, tcp_port, duration_s, gpu), server], deadline_s)


def cleanup_command(tcp_ports: list[int]) -> str:
    """Kills, on one host, every ib_write_bw this stage started there (matched by its own TCP port)."""
    pats = " ".join(shlex.quote(f"ib_write_bw .*-p {p}( |$)") for p in sorted(set(tcp_ports)))
    return f"for p in {pats}; do pkill -KILL -f -- \"$p\" || true; done"


def _argv(hca: str, ib_port: int, tcp_port: int, duration_s: int, gpu: int | None) -> list[str]:
    argv = ["ib_write_bw", "-d", hca, "-i", str(ib_port), "-p", str(tcp_port), "--report_gbits", "-D",
            str(duration_s)]
    if gpu is not None:
        argv.append(f"--use_cuda={gpu}")
    return argv


def _wrap(argv: list[str], deadline_s: int) -> str:
    return shlex.join(["timeout", "-k", "5", str(deadline_s), *argv])


def parse_bw(text: str, rc: int | None, expect_device: str | None = None) -> BwResult | BwUnknown:
    """The result row of one ib_write_bw report (server or client side)."""
    if len(text) > MAX_OUTPUT:
        return BwUnknown(f"{len(text)} bytes of output (a report is a few KB): not read")
    lines = text.splitlines()
    device = None
    for line in lines[:40]:
        m = _DEVICE.search(line)
        if m:
            device = m.group(1)
            break
    row = None
    for i, line in enumerate(lines):
        if _HEADER.match(line):
            row = next((ln for ln in lines[i + 1:] if ln.strip()), None)
            break
    if rc != 0:
        tail = next((ln.strip() for ln in reversed(lines) if ln.strip() and not set(ln.strip()) <= {"-"}), "")
        what = "was killed" if rc is None or rc >= 124 else f"exited with {rc}"
        return BwUnknown(f"ib_write_bw {what}" + (f": {tail[:200]}" if tail else " (no output)"))
    if row is None:
        return BwUnknown("no result row in the report (exited early or printed something else)")
    m = _ROW.match(row)
    if m is None:
        return BwUnknown(f"result row is not numbers: {row.strip()[:120]!r}")
    if expect_device is not None and device is not None and device != expect_device:
        return BwUnknown(f"the report is for device {device}, not {expect_device}")
    return BwResult(float(m.group(4)), float(m.group(3)), int(m.group(1)), int(m.group(2)), device)
