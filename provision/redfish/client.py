"""An async Redfish client for one BMC: httpx over HTTP/1.1 keep-alive, Basic auth or a Redfish session.

One `RedfishClient` talks to one BMC. It discovers resources by following `@odata.id` links from the
service root, uses `$expand` only when the service root advertises it, retries connection failures
and 5xx answers a bounded number of times with exponential backoff (never 401/403, never a timeout),
and turns every failure into a typed `RedfishError` (see `errors.py`) that carries the BMC's
`@Message.ExtendedInfo`. Credentials only ever go into one request header; they are never part of a
URL, an error message or a log line.

Why bringup keeps its own client: OpenStack's `sushy` and DMTF's `redfish` do one BMC's job as well, but
synchronously (512 BMCs at once means 512 threads, no shared deadline, unbounded answers); this is one asyncio
task per BMC on one keep-alive connection. tests/redfish/test_conformance_{validator,clients}.py keep both
honest: DMTF's validator checks the simulator; sushy, `redfish` and this client must agree on it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import httpx

from provision.aio import gather_or_cancel
from provision.redfish.answer import Answer, AnswerReader
from provision.redfish.auth import BmcAuth
from provision.redfish.errors import (
    RedfishAuthError,
    RedfishError,
    RedfishNotFound,
    RedfishProtocolError,
    RedfishRequestRejected,
    RedfishTimeout,
    RedfishTlsError,
    RedfishUnreachable,
    RedfishUnsupported,
)
from provision.redfish.options import ClientOptions as ClientOptions  # re-exported: tests import it from here
from provision.redfish.resource import ROOT, Resource, is_expanded, next_page, odata_id, sessions_path
from provision.redfish.transport import BmcTransport, MalformedAnswer
from provision.site.credentials import Login
from provision.site.tls import ssl_cause, tls_context

_RETRYABLE_STATUS = frozenset({500, 502, 503, 504})


@lru_cache(maxsize=4096)
def _raw_path(path: str) -> bytes:
    """The request target httpx would send for `path`, percent-encoded; BMCs of one site share their paths."""
    return httpx.URL(path).raw_path


_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class _MaybeDelivered(Exception):
    """The connection failed after the request was (perhaps) sent: `error` is what the caller sees."""

    def __init__(self, error: RedfishUnreachable) -> None:
        super().__init__(str(error))
        self.error = error


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


class RedfishClient:
    """One BMC. Use as `async with RedfishClient(...) as bmc:`; the session is deleted on exit."""

    def __init__(
        self,
        base_url: str,
        login: Login | None,
        *,
        tls: ssl.SSLContext | bool = True,
        options: ClientOptions | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.endpoint = self.base_url.split("://", 1)[-1]
        self.options = options or ClientOptions()
        self._answers = AnswerReader(self.endpoint, self.options.max_body_bytes, self.options.retries + 1)
        # Requests go straight to an httpx transport holding one keep-alive connection (iDRACs serve
        # few connections and each new one costs a TLS handshake): the client layer above it (URL
        # merging, cookies, auth flows, redirects) costs a third of the CPU per request and none of it
        # is wanted here; redirects in particular are refused, not followed.
        if transport is None:
            context = tls if isinstance(tls, ssl.SSLContext) else tls_context(tls, service="BMC")
            transport = BmcTransport(context) if self.options.lean_transport else httpx.AsyncHTTPTransport(
                verify=context, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
        self._transport: httpx.AsyncBaseTransport = transport
        # Through the lean transport requests go as raw parts (no httpx.Request/Response per request).
        self._lean = transport if isinstance(transport, BmcTransport) else None
        base = httpx.URL(self.base_url)
        self._origin = (base.scheme, base.host, base.port or (443 if base.scheme == "https" else 80))
        self._host = base.netloc
        self._prefix = base.raw_path.rstrip(b"/")
        self._headers = {"Accept": "application/json", "OData-Version": "4.0", "User-Agent": "bringup-redfish"}
        self._auth = BmcAuth(login, self.options.auth, self._headers)
        self._slots = asyncio.Semaphore(1)  # one connection: requests to one BMC queue for it
        self._root: Resource | None = None
        self._expand_refused = False
        self.requests = 0

    # lifecycle -----------------------------------------------------------------------------------

    async def __aenter__(self) -> RedfishClient:
        try:
            await self.open()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def open(self) -> Resource:
        """Read the service root and authenticate (a session when the BMC offers one, else Basic)."""
        root = await self.root()
        if self._auth.login is None:
            return root
        if self.options.auth == "basic":
            self._auth.basic = True
            return root
        sessions = sessions_path(root)
        if sessions is None:
            self._auth.basic = True
            return root
        await self._create_session(sessions)
        return root

    async def _create_session(self, sessions: str) -> None:
        try:
            resp = await self._send("POST", sessions, body=self._auth.session_body(), auth=False, retry_5xx=False)
        except (RedfishNotFound, RedfishUnsupported):
            self._auth.basic = True  # a BMC without sessions: fall back to Basic on every request
            return
        token = resp.headers.get("X-Auth-Token")
        if not token:
            raise RedfishProtocolError(
                "session created without an X-Auth-Token header", endpoint=self.endpoint, method="POST", path=sessions
            )
        self._auth.token = token
        location = resp.headers.get("Location")
        if location:
            self._auth.session_path = httpx.URL(location).path
        else:
            data = self._answers.json(resp, "POST", sessions)
            self._auth.session_path = odata_id(data)

    async def close(self) -> None:
        """Delete the session (BMCs allow few at a time) and close the connections."""
        try:
            if self._auth.token and self._auth.session_path:
                path = self._auth.session_path
                self._auth.session_path = None
                try:
                    async with asyncio.timeout(min(self.options.timeout_s, 5.0)):
                        await self._send("DELETE", path, retry_5xx=False)
                except (RedfishError, TimeoutError):
                    pass  # the BMC expires it on its own; nothing else to do
            self._auth.token = None
        finally:
            await self._transport.aclose()

    # requests ------------------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        auth: bool = True,
        retry_5xx: bool = True,
    ) -> Answer:
        """One request with the bounded retries; returns a 2xx response with its body read."""
        opts = self.options
        attempt = 0
        reauthed = False
        while True:
            try:
                resp = await self._attempt(method, path, body, headers, auth)
            except _MaybeDelivered as lost:
                # The request may have reached the BMC: sent again, a POST or PATCH could act twice
                # (a second ForceRestart, a second session that is never deleted).
                if attempt >= opts.retries or method not in _IDEMPOTENT_METHODS:
                    raise lost.error from None
                await asyncio.sleep(min(opts.backoff_s * 2.0**attempt, opts.backoff_max_s))
                attempt += 1
                continue
            except RedfishUnreachable:
                if attempt >= opts.retries:
                    raise
                await asyncio.sleep(min(opts.backoff_s * 2.0**attempt, opts.backoff_max_s))
                attempt += 1
                continue
            status = resp.status_code
            if 200 <= status < 300:
                return resp
            if status in _RETRYABLE_STATUS and retry_5xx and attempt < opts.retries:
                await asyncio.sleep(self._retry_delay(resp, attempt))
                attempt += 1
                continue
            if status == 401 and auth and self._auth.token and not reauthed and self._root is not None:
                # The session expired (or the BMC restarted): log in once more, then give up.
                reauthed = True
                self._auth.token = None
                sessions = sessions_path(self._root)
                if sessions:
                    await self._create_session(sessions)
                    continue
            raise self._answers.error(resp, method, path)

    def _retry_delay(self, resp: Answer, attempt: int) -> float:
        delay = self.options.backoff_s * 2.0**attempt
        after = resp.headers.get("Retry-After", "")
        if after.isdigit():
            delay = max(delay, float(after))
        return min(delay, self.options.backoff_max_s)

    async def _attempt(
        self, method: str, path: str, body: Any, headers: Mapping[str, str] | None, auth: bool
    ) -> Answer:
        all_headers = self._headers
        if auth:
            all_headers = self._auth.headers()
        content: bytes | None = None
        if body is not None:  # JSON, or bytes whose Content-Type the caller's headers give (a multipart push)
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            all_headers = {**all_headers, "Content-Type": "application/json"}
        if headers:
            all_headers = {**all_headers, **headers}
        # No per-step timeouts: the one deadline below bounds connect, send and read together.
        self.requests += 1
        err: dict[str, Any] = {"endpoint": self.endpoint, "method": method, "path": path}
        try:
            # The timeout starts once a connection is ours: queueing behind this client's own
            # requests is not the BMC being slow.
            async with self._slots, asyncio.timeout(self.options.timeout_s):
                if self._lean is not None:
                    return await self._exchange_lean(self._lean, method, path, all_headers, content)
                return await self._exchange_httpx(method, path, all_headers, content)
        except (TimeoutError, httpx.TimeoutException):
            describe = getattr(self._transport, "describe", None)
            where = f" ({describe()})" if callable(describe) else ""
            raise RedfishTimeout(f"no answer within {self.options.timeout_s:g} s{where}", **err) from None
        except MalformedAnswer as exc:  # it answered, with something that is not HTTP: not a cabling fault
            raise RedfishProtocolError(f"malformed HTTP answer: {exc}", **err) from None
        except httpx.TransportError as exc:
            cause = ssl_cause(exc)
            if cause is not None:
                raise RedfishTlsError(f"TLS handshake failed: {_short(cause)}", **err) from None
            error = RedfishUnreachable(f"connection failed: {_short(exc)}", **err)
            if isinstance(exc, httpx.ConnectError):  # nothing was sent
                raise error from None
            raise _MaybeDelivered(error) from None

    async def _exchange_lean(self, lean: BmcTransport, method: str, path: str, headers: Mapping[str, str],
                             content: bytes | None) -> Answer:
        head = [(b"Host", self._host), *((k.encode(), v.encode()) for k, v in headers.items())]
        if content is not None:
            head.append((b"Content-Length", str(len(content)).encode()))
        raw = await lean.exchange(method.encode(), self._origin, self._prefix + _raw_path(path), head, content or b"")
        resp_headers = httpx.Headers(raw.headers)
        try:
            body = await self._answers.read_capped(raw.status, resp_headers, raw.body, method, path)
        finally:
            await raw.body.aclose()
        return Answer(raw.status, resp_headers, body, raw.reason.decode("latin-1"))

    async def _exchange_httpx(self, method: str, path: str, headers: Mapping[str, str],
                              content: bytes | None) -> Answer:
        request = httpx.Request(method, self.base_url + path, content=content, headers=headers)
        resp = await self._transport.handle_async_request(request)
        try:
            body = await self._answers.read_response(resp, method, path)
        finally:
            await resp.aclose()
        return Answer(resp.status_code, resp.headers, body, resp.reason_phrase)

    # public API ----------------------------------------------------------------------------------

    async def root(self) -> Resource:
        """The service root (`/redfish/v1/`), read without credentials first as the standard allows."""
        if self._root is None:
            try:
                resp = await self._send("GET", ROOT, auth=False)
            except RedfishAuthError:
                if self._auth.login is None:
                    raise
                self._auth.basic = True  # some BMCs want credentials even for the root
                resp = await self._send("GET", ROOT)
            self._root = self._resource(resp, "GET", ROOT)
        return self._root

    def _resource(self, resp: Answer, method: str, path: str) -> Resource:
        return Resource(path, self._answers.json(resp, method, path), resp.headers.get("ETag"), resp.status_code)

    async def get(self, path: str) -> Resource:
        resp = await self._send("GET", path)
        return self._resource(resp, "GET", path)

    async def patch(self, path: str, body: Mapping[str, Any], *, etag: str | None = None) -> Resource:
        headers = {"If-Match": etag} if etag else None
        resp = await self._send("PATCH", path, body=dict(body), headers=headers)
        return self._resource(resp, "PATCH", path)

    async def post(self, path: str, body: Mapping[str, Any]) -> Resource:
        # A 5xx to an action may or may not have run it: only a 503 ("not now") is safe to repeat.
        resp = await self._send("POST", path, body=dict(body), retry_5xx=False)
        return self._resource(resp, "POST", path)

    async def post_located(self, path: str, body: Mapping[str, Any] | tuple[str, bytes]) -> tuple[Resource, str | None]:
        """POST an action the BMC may run as a task (JSON, or (content type, bytes)): its answer and the `Location`
        header (the task monitor, unchecked: the caller decides whether it is on this BMC)."""
        resp = await self._send("POST", path, body=body[1] if isinstance(body, tuple) else dict(body),
                                headers={"Content-Type": body[0]} if isinstance(body, tuple) else None, retry_5xx=False)
        return self._resource(resp, "POST", path), resp.headers.get("Location")

    async def expand_levels(self) -> int:
        """How many levels of `$expand=.` the BMC offers (0 when it does not advertise ExpandQuery)."""
        root = await self.root()
        features = root.data.get("ProtocolFeaturesSupported")
        expand = features.get("ExpandQuery") if isinstance(features, Mapping) else None
        if not isinstance(expand, Mapping) or not expand.get("NoLinks"):
            return 0
        if not expand.get("Levels"):
            return 1
        max_levels = expand.get("MaxLevels")
        return int(max_levels) if isinstance(max_levels, int) and max_levels > 0 else 1

    async def get_expanded(self, path: str, levels: int) -> Resource:
        """GET with `$expand=.($levels=N)` when the BMC supports it (capped at what it offers)."""
        offered = 0 if self._expand_refused else await self.expand_levels()
        n = min(levels, offered)
        if n <= 0:
            return await self.get(path)
        try:
            return await self.get(f"{path}?$expand=.($levels={n})")
        except (RedfishUnsupported, RedfishRequestRejected):
            # Advertised but refused (a firmware bug, or a proxy): follow links, here and from now on.
            self._expand_refused = True
            return await self.get(path)

    async def resolve(self, value: Any, context: str) -> Resource:
        """A navigation property: the inline resource when the BMC expanded it, else GET its link."""
        target = odata_id(value)
        if target is None:
            raise RedfishProtocolError(f"{context}: expected an @odata.id link, got {type(value).__name__}",
                                       endpoint=self.endpoint)
        if is_expanded(value):
            return Resource(target, value)
        return await self.get(target)

    async def members(self, collection: Resource | str, *, levels: int = 1) -> list[Resource]:
        """Every member of a collection (following `Members@odata.nextLink`), fetched concurrently
        when the BMC did not expand them."""
        if isinstance(collection, str):
            collection = await self.get_expanded(collection, levels)
        out: list[Resource] = []
        page: Resource | None = collection
        seen = {collection.path}
        while page is not None:
            raw = page.data.get("Members")
            if not isinstance(raw, list):
                raise RedfishProtocolError(f"{page.path} is not a collection (no Members list)",
                                           endpoint=self.endpoint, path=page.path)
            nxt = next_page(page, len(out) + len(raw), seen, self.endpoint)  # before fetching any of them
            inline = [Resource(odata_id(m) or page.path, m) if is_expanded(m) else None for m in raw]
            missing = [m for m, got in zip(raw, inline, strict=True) if got is None]
            fetched = iter(await gather_or_cancel(*(self.resolve(m, page.path) for m in missing)) if missing else [])
            out.extend(got if got is not None else next(fetched) for got in inline)
            page = await self.get(nxt) if nxt is not None else None
        return out
