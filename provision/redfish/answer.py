"""Reading a BMC's answer: the body under a size cap (declared, streamed and decompressed), its JSON, and
the typed error for an answer that is not a success."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from provision.redfish.errors import (
    RedfishAuthError,
    RedfishError,
    RedfishProtocolError,
    RedfishServerError,
    error_for_status,
    extended_info,
)
from provision.state.peer_json import JsonTooDeep, loads
from provision.state.peer_text import shown


@dataclass(frozen=True)
class Answer:
    """A BMC's answer with its body read (bounded) and the connection released."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    reason_phrase: str


@dataclass(frozen=True)
class AnswerReader:
    """Reads the answers of one BMC (`endpoint`) under its body limit; `attempts` is how often a 5xx was tried."""

    endpoint: str
    max_body_bytes: int
    attempts: int

    async def read_response(self, resp: httpx.Response, method: str, path: str) -> bytes:
        if resp.is_stream_consumed:  # a transport that buffers (httpx's MockTransport) already decoded it
            if len(resp.content) > self.max_body_bytes:
                raise self.too_large(resp.status_code, method, path)
            return resp.content
        # Straight from the transport's stream when it is one (httpx's raw iterator re-chunks it).
        stream = resp.stream if isinstance(resp.stream, httpx.AsyncByteStream) else resp.aiter_raw()
        return await self.read_capped(resp.status_code, resp.headers, stream, method, path)

    def too_large(self, status: int, method: str, path: str, size: str = "") -> RedfishProtocolError:
        return RedfishProtocolError(f"response{size} is over the {self.max_body_bytes}-byte limit",
                                    endpoint=self.endpoint, method=method, path=path, status=status)

    async def read_capped(self, status: int, headers: httpx.Headers, stream: AsyncIterable[bytes], method: str,
                          path: str) -> bytes:
        cap = self.max_body_bytes
        declared = headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise self.too_large(status, method, path, f" of {declared} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in stream:
            size += len(chunk)
            if size > cap:
                raise self.too_large(status, method, path)
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
                raise self.too_large(status, method, path)
        return raw

    def json(self, resp: Answer, method: str, path: str) -> Mapping[str, Any]:
        raw = resp.content
        if not raw.strip():
            return {}
        try:
            data = loads(raw, what=f"{method} {path}")
        except (RecursionError, JsonTooDeep):
            raise self._protocol_error(f"answer is JSON nested too deeply to parse ({len(raw)} bytes)", resp, method,
                                       path) from None
        except (ValueError, UnicodeDecodeError) as exc:
            kind = resp.headers.get("Content-Type", "no content type")
            raise self._protocol_error(f"answer is not JSON ({kind}, {len(raw)} bytes: {exc})", resp, method,
                                       path) from None
        if not isinstance(data, dict):
            raise self._protocol_error(f"answer is JSON but not an object ({type(data).__name__})", resp, method,
                                       path)
        return data

    def _protocol_error(self, message: str, resp: Answer, method: str, path: str) -> RedfishProtocolError:
        return RedfishProtocolError(message, endpoint=self.endpoint, method=method, path=path,
                                    status=resp.status_code)

    def error(self, resp: Answer, method: str, path: str) -> RedfishError:
        status = resp.status_code
        cls = error_for_status(status)
        try:
            body: Any = loads(resp.content) if resp.content.strip() else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = None
        messages, ids = extended_info(body)
        if 300 <= status < 400:
            target = shown(resp.headers.get("Location", "nowhere"), 200)
            detail = f"redirected to {target}; point the site file at the final address (redirects are not followed)"
        elif cls is RedfishAuthError:
            detail = "authentication refused"
        elif cls is RedfishServerError:
            detail = f"BMC error after {self.attempts} attempts"
        else:
            detail = shown(resp.reason_phrase, 100) or "request failed"
        return cls(detail, endpoint=self.endpoint, method=method, path=path, status=status, messages=messages,
                   message_ids=ids)
