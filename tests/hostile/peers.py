"""Small hostile peers on loopback: raw TCP (optionally TLS) servers whose every answer is scripted.

A peer runs in the test's own event loop (`asyncio.start_server`), so nothing outlives the test: the
`peer` context closes the listener and every connection it accepted. A behaviour is a coroutine
`(request, writer)`: `request` is what the client sent (head and body as bytes, or b"" for peers that
speak first), and the behaviour writes whatever it likes: a flood, a stall, garbage, a header without
end. The peer counts the bytes the client accepted (`sent`), which is how a test shows the client
stopped reading at its cap instead of reading a 100 MB answer whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from sim.redfish.tlscert import make_certificates

HOST = "127.0.0.1"
MiB = 1024 * 1024


@dataclass
class Peer:
    port: int
    sent: int = 0  # bytes the client's socket took (written and drained)
    requests: list[bytes] = field(default_factory=list)
    _writer: asyncio.StreamWriter | None = None

    async def send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await writer.drain()
        self.sent += len(data)


Behaviour = Callable[[Peer, bytes, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One HTTP request (head, and the body its Content-Length declares)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    return head + (await reader.readexactly(length) if length else b"")


@contextlib.asynccontextmanager
async def peer(script: list[Behaviour], *, tls: ssl.SSLContext | None = None,
               speaks_first: bool = False) -> AsyncIterator[Peer]:
    """A server answering its n-th request (on any connection) with `script[n]` (the last one repeats).
    `speaks_first`: the behaviour runs as soon as a client connects (an SSH server's banner)."""
    tasks: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []
    state = Peer(0)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        task = asyncio.current_task()
        if task is not None:
            tasks.add(task)
        try:
            while True:
                request = b"" if speaks_first else await read_request(reader)
                state.requests.append(request)
                behaviour = script[min(len(state.requests), len(script)) - 1]
                await behaviour(state, request, writer)
                if speaks_first:
                    return
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError):
            pass  # the client gave up on us: what the hostile peer is for
        finally:
            writer.close()

    server = await asyncio.start_server(serve, HOST, 0, ssl=tls)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        for writer in writers:
            writer.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


def server_tls(cert_dir: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for a loopback HTTPS peer."""
    ca, cert, key = make_certificates(cert_dir, [HOST])
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(ca))
    return server, client


# Behaviours ---------------------------------------------------------------------------------------


def answer(status: int, body: bytes, *, ctype: bytes = b"application/json",
           extra: bytes = b"") -> Behaviour:
    async def run(p: Peer, _: bytes, w: asyncio.StreamWriter) -> None:
        await p.send(w, b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
                     % (status, ctype, len(body), extra) + body)
    return run


def json_answer(doc: object) -> Behaviour:
    return answer(200, json.dumps(doc).encode())


def raw(data: bytes, *, then_stall: bool = True) -> Behaviour:
    """Send `data` as it is (a bad status line, garbage), then hold the connection open (or hang up)."""
    async def run(p: Peer, _: bytes, w: asyncio.StreamWriter) -> None:
        await p.send(w, data)
        if then_stall:
            await asyncio.sleep(3600)
        w.close()
    return run


def stall() -> Behaviour:
    """Read the request and never answer."""
    return raw(b"")


def drip(head: bytes, *, interval_s: float = 0.2) -> Behaviour:
    """A valid head promising a 10 kB body, then one byte every `interval_s`: never idle long enough
    for a per-read timeout to fire."""
    async def run(p: Peer, _: bytes, w: asyncio.StreamWriter) -> None:
        await p.send(w, head)
        for _step in range(10_000):
            await p.send(w, b" ")
            await asyncio.sleep(interval_s)
    return run


def flood(head: bytes, *, total: int = 100 * MiB) -> Behaviour:
    """`head`, then up to `total` bytes of body as fast as the client takes them."""
    async def run(p: Peer, _: bytes, w: asyncio.StreamWriter) -> None:
        await p.send(w, head)
        chunk = b"[" + b"0," * 32767 + b"0]"
        left = total
        while left > 0:
            await p.send(w, chunk[:left])
            left -= len(chunk)
    return run


def endless_header() -> Behaviour:
    """A status line, then one header that never ends (100 MB of it)."""
    return flood(b"HTTP/1.1 200 OK\r\nX-Padding: ")


def deep_json(depth: int = 100_000) -> Behaviour:
    return answer(200, b"[" * depth + b"]" * depth)


def echo_in_status_line() -> Behaviour:
    """A malformed status line that carries the request back, Authorization header and all."""
    async def run(p: Peer, request: bytes, w: asyncio.StreamWriter) -> None:
        await p.send(w, b"HTTP/1.1 OOPS " + request.replace(b"\r\n", b" ") + b"\r\n\r\n")
        await asyncio.sleep(3600)
    return run
