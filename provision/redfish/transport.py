"""httpx transport for one BMC: one keep-alive HTTP/1.1 connection, asyncio's native TLS, h11 framing.

A BMC is talked to over exactly one connection, one request at a time, so httpx's default transport
(httpcore's connection pool with its locks, cancellation shields and tracing around every request)
does work this client never needs; measured on the 2-core machine this project targets it cost about
twice the CPU per request of this transport, and at 500 BMCs that decides whether a harvest takes
seconds or twice as long. httpcore's default TLS (anyio's memory-BIO stream) was worse still, 5-10 ms
per request against 0.3 ms for asyncio's SSL transport.

What stays httpx's: the request and response models, the transport interface, and the exception
classes the client maps (`httpx.ConnectError`, `ReadTimeout`...). Framing (Content-Length, chunked,
`Connection: close`, keep-alive cycles) is h11's, the same parser httpcore uses. The body is streamed
to the caller, which caps its size as it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import h11
import httpx

from provision.site.tls import tls_context

_IDEMPOTENT = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"})
_READ_SIZE = 64 * 1024
_CLOSE_WAIT_S = 0.5  # for the BMC to answer our TLS close_notify; a hung BMC's connection is aborted after


def _timeout(request: httpx.Request, key: str) -> float | None:
    timeouts = request.extensions.get("timeout")
    value = timeouts.get(key) if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _Timeouts(NamedTuple):
    """Seconds for each step of one request; None leaves the step to the caller's own deadline."""

    connect: float | None
    write: float | None
    read: float | None


_NO_TIMEOUTS = _Timeouts(None, None, None)


class RawAnswer(NamedTuple):
    """A BMC's status line and headers as h11 read them, and the body still to be read."""

    status: int
    headers: list[tuple[bytes, bytes]]
    reason: bytes
    body: httpx.AsyncByteStream


class MalformedAnswer(httpx.RemoteProtocolError):
    """The BMC's bytes are not an HTTP answer (a bad status line, a bad Content-Length, a header block
    without end, garbage): the message says which, in words of our own (never the peer's bytes)."""


_H11_WORDS = {
    "illegal request line": "bad status line",  # h11 says "request" for a response's status line too
    "illegal status line": "bad status line",
    "no response line received": "no status line",
    "bad content-length": "bad Content-Length header",
    "conflicting content-length headers": "conflicting Content-Length headers",
    "receive buffer too long": "header block over 16 KiB without an end",
}


def _malformed(exc: h11.RemoteProtocolError) -> MalformedAnswer:
    words = str(exc).split(":", 1)[0].strip()  # what follows a colon is the peer's own bytes
    return MalformedAnswer(_H11_WORDS.get(words.lower(), words[:80] or "not HTTP"))


class _StaleConnection(Exception):
    """A reused keep-alive connection that the BMC had closed before it read our request."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 origin: tuple[str, str, int]) -> None:
        self.reader = reader
        self.writer = writer
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT)
        self.requests = 0
        self.received = 0  # bytes read from the BMC, all requests together
        self.answer_start = 0  # `received` when the current request was sent
        self.eof = False  # the BMC closed its end
        self.head_checked = False  # the current answer starts like an HTTP status line

    def reusable(self, origin: tuple[str, str, int]) -> bool:
        return (origin == self.origin and self.h11.our_state is h11.IDLE and self.h11.their_state is h11.IDLE
                and not self.reader.at_eof() and not self.writer.is_closing())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    async def next_event(self, timeout: float | None) -> Any:
        """The next h11 event, reading from the socket as h11 needs more bytes."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                if self.eof:  # the BMC hung up part-way: a lost answer, not a malformed one
                    raise httpx.RemoteProtocolError(_text(exc)) from exc
                raise _malformed(exc) from exc
            if event is h11.NEED_DATA and not self.head_checked:
                self._check_head()
            if event is not h11.NEED_DATA:
                return event
            try:
                if timeout is None:  # the caller keeps a deadline of its own
                    data = await self.reader.read(_READ_SIZE)
                else:
                    async with asyncio.timeout(timeout):
                        data = await self.reader.read(_READ_SIZE)
            except TimeoutError:
                raise httpx.ReadTimeout("no answer within the read timeout") from None
            except (OSError, ssl.SSLError) as exc:
                raise httpx.ReadError(_text(exc)) from exc
            self.received += len(data)
            self.eof = self.eof or not data
            try:
                self.h11.receive_data(data)  # b"" tells h11 the BMC closed the connection
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(_text(exc)) from exc

    def _check_head(self) -> None:
        """Garbage instead of a status line is refused on its first bytes: h11 would wait for a line end
        (or 16 KiB) that a garbage-sending BMC may never send, and the request would end as a timeout."""
        if self.h11.their_state is not h11.SEND_RESPONSE:
            return
        start = self.h11.trailing_data[0].lstrip(b"\r\n")[:5]
        if not (start.startswith(b"HTTP/") or b"HTTP/".startswith(start)):
            raise MalformedAnswer("the answer does not start with an HTTP status line")
        self.head_checked = len(start) == 5


class _Body(httpx.AsyncByteStream):
    """The response body, read from the connection as the caller iterates over it."""

    def __init__(self, transport: BmcTransport, conn: _Connection, timeout: float | None) -> None:
        self._transport = transport
        self._conn = conn
        self._timeout = timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        try:
            while not self._done:
                event = await conn.next_event(self._timeout)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._done = True
                    self._transport.phase = "idle"
                    self._transport._finished(conn)
                elif isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError("the BMC closed the connection in the middle of the body")
        except BaseException:
            self._transport._discard(conn)
            raise

    async def aclose(self) -> None:
        if not self._done:  # the caller stopped reading (body too large, an error): the connection is spent
            self._done = True
            self._transport._discard(self._conn)


class BmcTransport(httpx.AsyncBaseTransport):
    """One keep-alive HTTP/1.1 connection to one BMC, opened on first use and again when it was lost.

    Requests must not overlap (the client queues them); a request to another origin replaces the
    connection. The request's `timeout` extension (connect/read/write seconds) bounds each step.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None) -> None:
        self._ssl = ssl_context
        self._conn: _Connection | None = None
        self.connects = 0
        # Where the current request stands, for the error of a request that timed out: a BMC that
        # never finished the handshake, one that read the request and never answered, and one that
        # stopped in the middle of a body are different faults.
        self.phase = "idle"
        self._current: _Connection | None = None

    def describe(self) -> str:
        conn = self._current  # kept after a failed request discarded the connection
        if conn is None or self.phase in ("idle", "connecting"):
            return self.phase
        answered = conn.received - conn.answer_start
        return f"{self.phase}, {answered} bytes of answer (request {conn.requests} on connection {self.connects})"

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = origin
        tls = self._ssl if scheme == "https" else None
        if scheme == "https" and tls is None:
            tls = tls_context(True, service="BMC")
        self.phase = "connecting"
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls is not None else None, limit=_READ_SIZE)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(_text(exc)) from exc
        self.connects += 1
        return _Connection(reader, writer, origin)

    def _finished(self, conn: _Connection) -> None:
        """A response was read to its end: keep the connection for the next request when HTTP allows."""
        if conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
        else:  # `Connection: close`, or a response the BMC ends by closing
            self._discard(conn)

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        if self._conn is conn:
            self._conn = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        body = await request.aread()
        head = list(request.headers.raw)  # httpx.Request has set Host and Content-Length
        if "host" not in request.headers:
            head.insert(0, (b"Host", url.netloc))
        if body and "content-length" not in request.headers:
            head.append((b"Content-Length", str(len(body)).encode()))
        steps = _Timeouts(_timeout(request, "connect"), _timeout(request, "write"), _timeout(request, "read"))
        answer = await self.exchange(request.method.encode(), (url.scheme, url.host, port), url.raw_path, head, body,
                                     steps)
        return httpx.Response(answer.status, headers=answer.headers, stream=answer.body,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason})

    async def exchange(self, method: bytes, origin: tuple[str, str, int], target: bytes,
                       head: list[tuple[bytes, bytes]], body: bytes, timeouts: _Timeouts | None = None) -> RawAnswer:
        """One request as raw parts, for a caller that builds its head itself rather than an
        httpx.Request per request (building one costs about a sixth of a harvest's CPU). `head` must
        carry Host, and Content-Length when there is a body."""
        steps = timeouts or _NO_TIMEOUTS
        conn = self._conn
        if conn is not None and not conn.reusable(origin):
            self._discard(conn)
            conn = None
        for attempt in (0, 1):
            if conn is None:
                conn = self._conn = await self._connect(origin, steps.connect)
            try:
                return await self._exchange(conn, method, target, head, body, steps, retry_stale=attempt == 0)
            except _StaleConnection:
                self._discard(conn)
                conn = None
            except BaseException:
                self._discard(conn)
                raise
        raise httpx.RemoteProtocolError("the BMC closed the connection without answering")  # pragma: no cover

    async def _exchange(self, conn: _Connection, method: bytes, target: bytes, head: list[tuple[bytes, bytes]],
                        body: bytes, steps: _Timeouts, *, retry_stale: bool) -> RawAnswer:
        reused = conn.requests > 0
        conn.requests += 1
        received = conn.answer_start = conn.received
        conn.head_checked = False
        self._current = conn
        self.phase = "sending the request"
        retryable = retry_stale and reused and method in _IDEMPOTENT
        try:
            data = conn.h11.send(h11.Request(method=method, target=target, headers=head))
            if body:
                data = (data or b"") + (conn.h11.send(h11.Data(data=body)) or b"")
            data = (data or b"") + (conn.h11.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(_text(exc)) from exc
        try:
            conn.writer.write(data)
            if conn.writer.transport.get_write_buffer_size():  # the kernel did not take it all at once
                async with asyncio.timeout(steps.write):
                    await conn.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("sending the request timed out") from None
        except (OSError, ssl.SSLError, RuntimeError) as exc:
            if retryable:
                raise _StaleConnection() from exc
            raise httpx.WriteError(_text(exc)) from exc
        self.phase = "request sent, awaiting the answer"
        try:
            event = await conn.next_event(steps.read)
            while isinstance(event, h11.InformationalResponse):
                event = await conn.next_event(steps.read)
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            # A keep-alive connection the BMC closed while it sat idle: nothing of an answer arrived.
            if retryable and conn.received == received:
                raise _StaleConnection() from exc
            if conn.received == received:
                raise httpx.RemoteProtocolError("the BMC closed the connection without answering") from exc
            raise
        if not isinstance(event, h11.Response):  # pragma: no cover - h11 yields a Response or raises
            raise httpx.RemoteProtocolError(f"unexpected HTTP event {type(event).__name__}")
        self.phase = "reading the body"
        return RawAnswer(event.status_code, event.headers.raw_items(), bytes(event.reason),
                         _Body(self, conn, steps.read))

    async def aclose(self) -> None:
        if self._conn is not None:
            conn = self._conn
            self._discard(conn)
            # Closing a TLS stream waits for the BMC's close_notify; left to the event loop, a loop that
            # ends first (asyncio.run returning) leaves the socket open until garbage collection.
            try:
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await conn.writer.wait_closed()
            except (TimeoutError, OSError, ssl.SSLError):
                conn.writer.transport.abort()
