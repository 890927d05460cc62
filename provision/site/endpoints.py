"""`address:port` strings both ways, with IPv6 addresses in brackets (`[fd00::1]:443`)."""

from __future__ import annotations


def join_host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def split_host_port(value: str, default_port: int) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]` or `[v6]:port` (a bare IPv6 address has no port); ValueError when the
    port is not a number from 1 to 65535."""
    if value.startswith("["):
        address, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        address, port = value.split(":")
    else:
        address, port = value, ""
    if not port:
        return address, default_port
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: port {port!r} is not a number from 1 to 65535")
    return address, int(port)
