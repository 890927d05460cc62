"""A small HTTP/1.1 server core on asyncio streams: keep-alive, Content-Length bodies, nothing else.

Hundreds of BMCs in one process need a server that costs little per request; this one parses the
request line and headers by hand and leaves routing to a handler coroutine. A handler may return
`HANG` to keep the connection open without ever answering (a wedged BMC).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024
_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request",
            401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 411: "Length Required", 412: "Precondition Failed", 413: "Payload Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


JSON_TYPE = "application/json;odata.metadata=minimal;charset=utf-8"


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, status: int, payload: Any = None, headers: dict[str, str] | None = None) -> Response:
        body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        hdrs = {"Content-Type": JSON_TYPE} if body else {}
        hdrs.update(headers or {})
        return cls(status, body, hdrs)

    def encode(self, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Status')}"]
        for k, v in self.headers.items():
            lines.append(f"{k}: {v}")
        lines.append(f"Content-Length: {len(self.body)}")
        lines.append("OData-Version: 4.0")
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


class Hang:
    pass


HANG = Hang()
Handler = Callable[[Request], Awaitable[Response | Hang]]


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
                return
            try:
                text = head.decode("latin-1")
                request_line, *header_lines = text[:-4].split("\r\n")
                method, target, _version = request_line.split(" ", 2)
                headers: dict[str, str] = {}
                for line in header_lines:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or "0")
            except ValueError:
                writer.write(Response.of(400, {"error": {"message": "malformed request"}}).encode(False))
                await writer.drain()
                return
            if headers.get("transfer-encoding"):
                writer.write(Response.of(411).encode(False))
                await writer.drain()
                return
            if length > MAX_BODY:
                writer.write(Response.of(413).encode(False))
                await writer.drain()
                return
            body = await reader.readexactly(length) if length else b""
            response = await handler(Request(method, target, headers, body))
            if isinstance(response, Hang):
                while await reader.read(65536):
                    pass
                return
            keep = headers.get("connection", "").lower() != "close"
            writer.write(response.encode(keep))
            await writer.drain()
            if not keep:
                return
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        return
    finally:
        with contextlib.suppress(Exception):
            writer.close()
