"""roles/vendor_repo's `vendor_key` lookup: a vendor key downloaded once by the controller for every host's worker.

Each case runs the lookup's Python in processes of their own (as Ansible's forked workers do; importing ansible-core
into the pytest worker is avoided, see test_template_code_cache.py), against a key server on loopback that counts
what it was asked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.ansible.conftest import REPO

PLUGINS = REPO / "roles/vendor_repo/lookup_plugins"
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGJ...\n-----END PGP PUBLIC KEY BLOCK-----\n"


class _Server(ThreadingHTTPServer):
    body = KEY.encode()
    requests = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.requests += 1
        time.sleep(0.2)  # long enough for the other workers to be waiting on the lock
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def key_server() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _fetch_in_processes(server: _Server, cache: Path, count: int) -> list[subprocess.CompletedProcess[str]]:
    url = f"http://127.0.0.1:{server.server_address[1]}/gpgkey"
    code = (f"import sys; sys.path.insert(0, {str(PLUGINS)!r}); from vendor_key import fetch\n"
            f"print(fetch({url!r}, __import__('pathlib').Path({str(cache)!r}), 3600, 10), end='')")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(count)]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_many_workers_at_once_download_the_key_once_and_all_get_it(key_server: _Server, tmp_path: Path) -> None:
    cache = tmp_path / "keys" / "docker-ABC.asc"
    runs = _fetch_in_processes(key_server, cache, 6)
    assert [r.returncode for r in runs] == [0] * 6, [r.stderr[-500:] for r in runs]
    assert {r.stdout for r in runs} == {KEY}
    assert key_server.requests == 1
    assert cache.read_text() == KEY and oct(cache.stat().st_mode & 0o777) == "0o644"


def test_a_copy_older_than_max_age_is_downloaded_again(key_server: _Server, tmp_path: Path) -> None:
    cache = tmp_path / "docker-ABC.asc"
    cache.write_text("an old key\n")
    os.utime(cache, (time.time() - 7200, time.time() - 7200))
    runs = _fetch_in_processes(key_server, cache, 1)
    assert runs[0].returncode == 0 and runs[0].stdout == KEY and key_server.requests == 1


def test_an_answer_too_large_for_a_key_is_refused_and_not_kept(key_server: _Server, tmp_path: Path) -> None:
    key_server.body = b"A" * (2 << 20)
    cache = tmp_path / "docker-ABC.asc"
    runs = _fetch_in_processes(key_server, cache, 1)
    assert runs[0].returncode != 0 and "larger than 1048576 bytes, not a signing key" in runs[0].stderr
    assert not cache.exists()
