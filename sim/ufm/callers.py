"""Which process on this machine sent a request: the simulated UFM's `kill` fault (sim/ufm/faults.py) ends its
caller with SIGKILL at a chosen point, as a crash of the controller would, without a hook in the caller.

The caller's socket is the one whose local address is the peer address the server sees: its inode is in
the kernel's socket table (`/proc/net/tcp`, `/proc/net/tcp6`, proc(5)), and the process holding it has a
`/proc/<pid>/fd/<n>` link to `socket:[<inode>]`. Both ends live in this machine's (or this test's) network
namespace, on loopback.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import struct
from pathlib import Path

PROC = Path("/proc")


def _hex_address(host: str, port: int) -> str:
    """`/proc/net/tcp`'s form of an address: the IP's bytes as the kernel stores them, in hex, and the port."""
    ip = ipaddress.ip_address(host)
    packed = ip.packed
    text = "".join(f"{struct.unpack('=I', packed[i:i + 4])[0]:08X}" for i in range(0, len(packed), 4))
    return f"{text}:{port:04X}"


def socket_inode(peer: tuple[str, int]) -> int | None:
    host, port = peer[0], peer[1]
    wanted = _hex_address(host, port)
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[1] == wanted and fields[9] != "0":
                return int(fields[9])
    return None


def caller_pid(peer: tuple[str, int]) -> int | None:
    """The process that holds the client end of the connection from `peer` (None when it is not found)."""
    inode = socket_inode(peer)
    if inode is None:
        return None
    link = f"socket:[{inode}]"
    for proc in PROC.iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) == link for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue
    return None


def kill_caller(peer: tuple[str, int] | None) -> int | None:
    """SIGKILL the process that sent a request from `peer`; its pid, or None when none was found."""
    pid = caller_pid(peer) if peer is not None else None
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    return pid

