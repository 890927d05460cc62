"""Peers that echo the request back in their 401 answer: a Redfish BMC (HTTPS) and a MAAS region (HTTP).

Real BMCs and proxies do this (a debugging 401 page quoting the request). Whatever the client sent,
credentials included, comes back in the body as the peer's error message, so any code that prints or
records what the peer said would leak them.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sim.redfish.tlscert import make_certificates


class _Echo(BaseHTTPRequestHandler):
    server: _EchoServer

    def log_message(self, *_: Any) -> None:
        pass

    def _body(self) -> str:
        size = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(size).decode("utf-8", "replace") if size else ""

    def _answer(self, status: int, payload: Any) -> None:
        blob = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)

    def _echo(self) -> None:
        body = self._body()
        # The credential first: a client keeping only the start of a peer's message still gets it.
        headers = sorted(self.headers.items(), key=lambda kv: kv[0].lower() not in ("authorization", "x-auth-token"))
        seen = " ".join(f"{k}: {v}" for k, v in headers) + f" {body} ({self.command} {self.path})"
        self.server.seen.append(seen)
        if self.server.redfish and self.path.rstrip("/") == "/redfish/v1" and self.command == "GET":
            root: dict[str, Any] = {"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"}}
            if self.server.sessions:
                root["Links"] = {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}
            self._answer(200, root)
            return
        message = f"unauthorized: you sent {seen}"
        if self.server.redfish:
            self._answer(401, {"error": {"code": "Base.1.8.GeneralError", "message": message,
                                         "@Message.ExtendedInfo": [{"Message": message}]}})
        else:
            blob = message.encode()
            self.send_response(401)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            self.wfile.write(blob)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _echo


class _EchoServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, redfish: bool, sessions: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.redfish = redfish
        self.sessions = sessions
        self.seen: list[str] = []


@contextmanager
def echo_peer(cert_dir: Path | None = None, *, sessions: bool = False) -> Iterator[_EchoServer]:
    """A BMC (HTTPS, when `cert_dir` is given) or a MAAS (HTTP) answering 401 with the request echoed."""
    server = _EchoServer(redfish=cert_dir is not None, sessions=sessions)
    if cert_dir is not None:
        _, cert, key = make_certificates(cert_dir, ["127.0.0.1"])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
