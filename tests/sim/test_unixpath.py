"""sim/unixpath.py: a Unix socket whose path is longer than sun_path (108 bytes) binds and connects where it
is, as the lab's agent zygote does under a deep run directory."""

from __future__ import annotations

import socket
from pathlib import Path

from sim.unixpath import SUN_PATH_MAX, socket_address


def test_a_socket_deeper_than_sun_path_binds_and_connects_in_its_own_folder(tmp_path: Path) -> None:
    folder = tmp_path / ("d" * 120)
    folder.mkdir()
    path = folder / "zygote.sock"
    assert len(str(path)) > SUN_PATH_MAX
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        with socket_address(path) as address:
            server.bind(address)
        server.listen()
        assert path.is_socket()
        with socket_address(path) as address:
            client.connect(address)
        accepted, _ = server.accept()
        client.sendall(b"ping")
        assert accepted.recv(4) == b"ping"
        accepted.close()


def test_a_short_path_is_used_as_it_is(tmp_path: Path) -> None:
    with socket_address(tmp_path / "s.sock") as address:
        assert address == str(tmp_path / "s.sock")
