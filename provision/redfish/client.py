"""An async Redfish client for one BMC: httpx over HTTP/1.1 keep-alive, Basic auth or a Redfish session.

One `RedfishClient` talks to one BMC. It discovers resources by following `@odata.id` links from the
service root, uses `$expand` only when the service root advertises it, retries connection failures
and 5xx answers a bounded number of times with exponential backoff (never 401/403, never a timeout),
and turns every failure into a typed `RedfishError` (see `errors.py`) that carries the BMC's
`@Message.ExtendedInfo`. Credentials only ever go into one request header; they are never part of a
URL, an error message or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import zlib
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import httpx

from provision.aio import gather_or_cancel
from provision.redfish.errors import (
    RedfishAuthError,
    RedfishError,
    RedfishNotFound,
    RedfishProtocolError,
    RedfishRequestRejected,
    RedfishServerError,
    RedfishTimeout,
    RedfishTlsError,
    RedfishUnreachable,
    RedfishUnsupported,
    error_for_status,
    extended_info,
)
from provision.redfish.transport import BmcTransport
from provision.site.credentials import Login

ROOT = "/redfish/v1/"
AuthMode = Literal["session", "basic"]
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


@dataclass(frozen=True)
class ClientOptions:
    timeout_s: float = 10.0
    retries: int = 2
    backoff_s: float = 0.5
    backoff_max_s: float = 4.0
    auth: AuthMode = "session"
    max_body_bytes: int = 4 * 1024 * 1024
    # The one-connection h11 transport (transport.py) costs half the CPU per request of httpx's own
    # pooled one, which at 500 BMCs on 2 cores decides whether a harvest takes 6 or 10 s. False selects
    # httpx's transport (one pooled connection), kept as a fallback.
    lean_transport: bool = True


@dataclass(frozen=True)
class Answer:
    """A BMC's answer with its body read (bounded) and the connection released."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    reason_phrase: str


@dataclass(frozen=True)
class Resource:
    """One Redfish resource as the BMC sent it, with its ETag when the BMC offered one."""

    path: str
    data: Mapping[str, Any]
    etag: str | None = None
    status: int = 200

    def link(self, key: str) -> str | None:
        """The `@odata.id` of a navigation property, or None when the resource has no such link."""
        return odata_id(self.data.get(key))

    def require_link(self, key: str) -> str:
        found = self.link(key)
        if found is None:
            raise RedfishProtocolError(f"{self.path} has no {key} link", path=self.path)
        return found


def odata_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        target = value.get("@odata.id")
        if isinstance(target, str) and target.startswith("/"):
            return target
    return None


def _is_expanded(value: Any) -> bool:
    return isinstance(value, Mapping) and odata_id(value) is not None and len(value) > 1


_CONTEXTS: dict[bool, ssl.SSLContext] = {}


def tls_context(verify: bool, ca_bundle: str | None = None) -> ssl.SSLContext:
    """One context for every BMC of a site (building one costs milliseconds; loading the system
    trust store, tens of them).

    Verification is on unless the site opts out; `ca_bundle` replaces the system trust store, which is
    how a site trusts its iDRACs' own CA. Without verification no trust store is loaded at all: OpenSSL
    still looks every presented certificate up in it, about half a millisecond of each handshake.
    """
    if ca_bundle and verify:
        try:
            return ssl.create_default_context(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            raise RedfishTlsError(f"cannot load the BMC CA bundle {ca_bundle}: {exc}") from None
    if verify not in _CONTEXTS:
        if verify:
            ctx = ssl.create_default_context()
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        _CONTEXTS[verify] = ctx
    return _CONTEXTS[verify]


def _ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


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
        self._login = login
        self.options = options or ClientOptions()
        # Requests go straight to an httpx transport holding one keep-alive connection (iDRACs serve
        # few connections and each new one costs a TLS handshake): the client layer above it (URL
        # merging, cookies, auth flows, redirects) costs a third of the CPU per request and none of it
        # is wanted here; redirects in particular are refused, not followed.
        if transport is None:
            context = tls if isinstance(tls, ssl.SSLContext) else tls_context(tls)
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
        self._authed_headers: dict[str, str] | None = None  # _headers plus the credential, built once
        self._slots = asyncio.Semaphore(1)  # one connection: requests to one BMC queue for it
        self.__token: str | None = None
        self._session_path: str | None = None
        self.__basic = False
        self._root: Resource | None = None
        self._expand_refused = False
        self.requests = 0

    # The credential header of every request is built when the way of authenticating changes, not
    # per request (Basic means a base64 of the password each time otherwise).

    @property
    def _token(self) -> str | None:
        return self.__token

    @_token.setter
    def _token(self, value: str | None) -> None:
        self.__token = value
        self._authed_headers = None

    @property
    def _basic(self) -> bool:
        return self.__basic

    @_basic.setter
    def _basic(self, value: bool) -> None:
        self.__basic = value
        self._authed_headers = None

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
        if self._login is None:
            return root
        if self.options.auth == "basic":
            self._basic = True
            return root
        sessions = self._sessions_path(root)
        if sessions is None:
            self._basic = True
            return root
        await self._create_session(sessions)
        return root

    def _sessions_path(self, root: Resource) -> str | None:
        links = root.data.get("Links")
        if isinstance(links, Mapping):
            found = odata_id(links.get("Sessions"))
            if found:
                return found
        service = root.link("SessionService")
        return f"{service.rstrip('/')}/Sessions" if service else None

    async def _create_session(self, sessions: str) -> None:
        assert self._login is not None
        body = {"UserName": self._login.username, "Password": self._login.password.reveal()}
        try:
            resp = await self._send("POST", sessions, body=body, auth=False, retry_5xx=False)
        except (RedfishNotFound, RedfishUnsupported):
            self._basic = True  # a BMC without sessions: fall back to Basic on every request
            return
        token = resp.headers.get("X-Auth-Token")
        if not token:
            raise RedfishProtocolError(
                "session created without an X-Auth-Token header", endpoint=self.endpoint, method="POST", path=sessions
            )
        self._token = token
        location = resp.headers.get("Location")
        if location:
            self._session_path = httpx.URL(location).path
        else:
            data = self._json(resp, "POST", sessions)
            self._session_path = odata_id(data)

    async def close(self) -> None:
        """Delete the session (BMCs allow few at a time) and close the connections."""
        try:
            if self._token and self._session_path:
                path = self._session_path
                self._session_path = None
                try:
                    async with asyncio.timeout(min(self.options.timeout_s, 5.0)):
                        await self._send("DELETE", path, retry_5xx=False)
                except (RedfishError, TimeoutError):
                    pass  # the BMC expires it on its own; nothing else to do
            self._token = None
        finally:
            await self._transport.aclose()

    # requests ------------------------------------------------------------------------------------

    def _auth_headers(self) -> dict[str, str]:
        if self._token:
            return {"X-Auth-Token": self._token}
        if self._login is not None and (self._basic or self.options.auth == "basic"):
            raw = f"{self._login.username}:{self._login.password.reveal()}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}

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
            if status == 401 and auth and self._token and not reauthed and self._root is not None:
                # The session expired (or the BMC restarted): log in once more, then give up.
                reauthed = True
                self._token = None
                sessions = self._sessions_path(self._root)
                if sessions:
                    await self._create_session(sessions)
                    continue
            raise self._error(resp, method, path)

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
            if self._authed_headers is None:
                self._authed_headers = {**self._headers, **self._auth_headers()}
            all_headers = self._authed_headers
        content: bytes | None = None
        if body is not None:
            content = json.dumps(body).encode()
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
                    head = [(b"Host", self._host), *((k.encode(), v.encode()) for k, v in all_headers.items())]
                    if content is not None:
                        head.append((b"Content-Length", str(len(content)).encode()))
                    raw = await self._lean.exchange(method.encode(), self._origin, self._prefix + _raw_path(path),
                                                    head, content or b"")
                    status, resp_headers, reason = raw.status, httpx.Headers(raw.headers), raw.reason.decode("latin-1")
                    try:
                        content = await self._read_capped(status, resp_headers, raw.body, method, path)
                    finally:
                        await raw.body.aclose()
                else:
                    request = httpx.Request(method, self.base_url + path, content=content, headers=all_headers)
                    resp = await self._transport.handle_async_request(request)
                    status, resp_headers, reason = resp.status_code, resp.headers, resp.reason_phrase
                    try:
                        content = await self._read_response(resp, method, path)
                    finally:
                        await resp.aclose()
        except (TimeoutError, httpx.TimeoutException):
            describe = getattr(self._transport, "describe", None)
            where = f" ({describe()})" if callable(describe) else ""
            raise RedfishTimeout(f"no answer within {self.options.timeout_s:g} s{where}", **err) from None
        except httpx.TransportError as exc:
            cause = _ssl_cause(exc)
            if cause is not None:
                raise RedfishTlsError(f"TLS handshake failed: {_short(cause)}", **err) from None
            error = RedfishUnreachable(f"connection failed: {_short(exc)}", **err)
            if isinstance(exc, httpx.ConnectError):  # nothing was sent
                raise error from None
            raise _MaybeDelivered(error) from None
        return Answer(status, resp_headers, content, reason)

    async def _read_response(self, resp: httpx.Response, method: str, path: str) -> bytes:
        if resp.is_stream_consumed:  # a transport that buffers (httpx's MockTransport) already decoded it
            if len(resp.content) > self.options.max_body_bytes:
                raise self._too_large(resp.status_code, method, path)
            return resp.content
        # Straight from the transport's stream when it is one (httpx's raw iterator re-chunks it).
        stream = resp.stream if isinstance(resp.stream, httpx.AsyncByteStream) else resp.aiter_raw()
        return await self._read_capped(resp.status_code, resp.headers, stream, method, path)

    def _too_large(self, status: int, method: str, path: str, size: str = "") -> RedfishProtocolError:
        return RedfishProtocolError(f"response{size} is over the {self.options.max_body_bytes}-byte limit",
                                    endpoint=self.endpoint, method=method, path=path, status=status)

    async def _read_capped(self, status: int, headers: httpx.Headers, stream: AsyncIterable[bytes], method: str,
                           path: str) -> bytes:
        cap = self.options.max_body_bytes
        declared = headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise self._too_large(status, method, path, f" of {declared} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in stream:
            size += len(chunk)
            if size > cap:
                raise self._too_large(status, method, path)
            chunks.append(chunk)
        raw = b"".join(chunks)
        encoding = headers.get("Content-Encoding", "").lower()
        if encoding in ("gzip", "deflate"):
            try:
                raw = zlib.decompress(raw, 47 if encoding == "gzip" else 15)
            except zlib.error as exc:
                raise RedfishProtocolError(
                    f"cannot decode {encoding} body: {exc}", endpoint=self.endpoint, method=method, path=path
                ) from None
            if len(raw) > cap:
                raise self._too_large(status, method, path)
        return raw

    def _json(self, resp: Answer, method: str, path: str) -> Mapping[str, Any]:
        raw = resp.content
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            kind = resp.headers.get("Content-Type", "no content type")
            raise RedfishProtocolError(
                f"answer is not JSON ({kind}, {len(raw)} bytes: {exc})",
                endpoint=self.endpoint,
                method=method,
                path=path,
                status=resp.status_code,
            ) from None
        if not isinstance(data, dict):
            raise RedfishProtocolError(
                f"answer is JSON but not an object ({type(data).__name__})",
                endpoint=self.endpoint,
                method=method,
                path=path,
                status=resp.status_code,
            )
        return data

    def _error(self, resp: Answer, method: str, path: str) -> RedfishError:
        status = resp.status_code
        cls = error_for_status(status)
        try:
            body: Any = json.loads(resp.content) if resp.content.strip() else None
        except (ValueError, UnicodeDecodeError):
            body = None
        messages, ids = extended_info(body)
        if 300 <= status < 400:
            target = resp.headers.get("Location", "nowhere")
            detail = f"redirected to {target}; point the site file at the final address (redirects are not followed)"
        elif cls is RedfishAuthError:
            detail = "authentication refused"
        elif cls is RedfishServerError:
            detail = f"BMC error after {self.options.retries + 1} attempts"
        else:
            detail = resp.reason_phrase or "request failed"
        return cls(detail, endpoint=self.endpoint, method=method, path=path, status=status, messages=messages,
                   message_ids=ids)

    # public API ----------------------------------------------------------------------------------

    async def root(self) -> Resource:
        """The service root (`/redfish/v1/`), read without credentials first as the standard allows."""
        if self._root is None:
            try:
                resp = await self._send("GET", ROOT, auth=False)
            except RedfishAuthError:
                if self._login is None:
                    raise
                self._basic = True  # some BMCs want credentials even for the root
                resp = await self._send("GET", ROOT)
            self._root = Resource(ROOT, self._json(resp, "GET", ROOT), resp.headers.get("ETag"), resp.status_code)
        return self._root

    async def get(self, path: str) -> Resource:
        resp = await self._send("GET", path)
        return Resource(path, self._json(resp, "GET", path), resp.headers.get("ETag"), resp.status_code)

    async def patch(self, path: str, body: Mapping[str, Any], *, etag: str | None = None) -> Resource:
        headers = {"If-Match": etag} if etag else None
        resp = await self._send("PATCH", path, body=dict(body), headers=headers)
        return Resource(path, self._json(resp, "PATCH", path), resp.headers.get("ETag"), resp.status_code)

    async def post(self, path: str, body: Mapping[str, Any]) -> Resource:
        # A 5xx to an action may or may not have run it: only a 503 ("not now") is safe to repeat.
        resp = await self._send("POST", path, body=dict(body), retry_5xx=False)
        return Resource(path, self._json(resp, "POST", path), resp.headers.get("ETag"), resp.status_code)

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
        if _is_expanded(value):
            return Resource(target, value)
        return await self.get(target)

    async def members(self, collection: Resource | str, *, levels: int = 1) -> list[Resource]:
        """Every member of a collection (following `Members@odata.nextLink`), fetched concurrently
        when the BMC did not expand them."""
        if isinstance(collection, str):
            collection = await self.get_expanded(collection, levels)
        out: list[Resource] = []
        page: Resource | None = collection
        while page is not None:
            raw = page.data.get("Members")
            if not isinstance(raw, list):
                raise RedfishProtocolError(f"{page.path} is not a collection (no Members list)",
                                           endpoint=self.endpoint, path=page.path)
            inline = [Resource(odata_id(m) or page.path, m) if _is_expanded(m) else None for m in raw]
            missing = [m for m, got in zip(raw, inline, strict=True) if got is None]
            fetched = iter(await gather_or_cancel(*(self.resolve(m, page.path) for m in missing)) if missing else [])
            out.extend(got if got is not None else next(fetched) for got in inline)
            nxt = page.data.get("Members@odata.nextLink")
            page = await self.get(nxt) if isinstance(nxt, str) and nxt.startswith("/") else None
        return out

    async def child_members(self, resource: Resource, key: str) -> list[Resource]:
        """Members of the collection a resource links to under `key` (inline when it was expanded)."""
        value = resource.data.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("Members"), list):
            return await self.members(Resource(odata_id(value) or resource.path, value))
        target = odata_id(value)
        if target is None:
            raise RedfishProtocolError(f"{resource.path} has no {key} link", endpoint=self.endpoint,
                                       path=resource.path)
        return await self.members(target)
