"""Async MAAS REST API 2.0 client: OAuth 1.0 PLAINTEXT (oauthlib), multipart forms, `op=` actions.

Retries: GET, PUT and DELETE are re-sent on timeouts, dropped connections and 5xx. A POST (creating a
machine, or an `op=` action such as allocate or deploy) is not idempotent: it is re-sent only when the
connection failed before anything was sent; once it may have reached MAAS, a lost answer is
`MaasNoAnswer` and a 5xx is `MaasServerError`, raised at once. `create_machine` then reads MAAS back
to tell an enlistment that happened from one that did not.

Bounds, as the BMC client has them: each attempt has one deadline (`timeout_s`, connect to the last
byte of the body, so a region answering a byte a second cannot hold a request past it), and the
answer is streamed under a byte cap (`max_body_bytes`, declared or decoded), never read whole first.
An answer over the cap, not JSON, or nested too deep to parse is `MaasBadResponse`.

Why this client and not Canonical's python-libmaas (issue 37, item 4). python-libmaas 0.6.8, the last release
(2022, "Alpha"), installs and runs on Python 3.11 and is asyncio-native; tests/maas/test_libmaas_conformance.py
drives the MAAS simulator with it through create, commission, deploy and release, beside this client's own
tests, so both read the same API. It stays a conformance check and does not replace this client, because at
the scale of a bring-up (hundreds of machines enlisted, then polled every few seconds) it costs what this
client avoids: every call opens a new aiohttp session and connection, so a new TCP and TLS handshake per
request (bones `CallAPI.dispatch`); an answer is read whole with no size cap and only aiohttp's default 5-minute
deadline; nothing is retried, and nothing tells a POST whose answer was lost from one that never arrived; TLS
is verified against the system store or not at all (`insecure`), with no site CA bundle; its waits poll one
machine at a time with no deadline; every refusal is one `CallError` (status and raw body) where the bring-up
maps each status to a typed error and reads MAAS's `{field: [messages]}`. Outside a running loop its
synchronous wrappers call `asyncio.get_event_loop()`, which Python 3.12 deprecates there. It also pulls
aiohttp, macaroonbakery and pymongo (about 30 MB) into a venv that needs none of them otherwise.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from oauthlib.oauth1 import SIGNATURE_PLAINTEXT, SIGNATURE_TYPE_AUTH_HEADER
from oauthlib.oauth1 import Client as OAuthClient

from provision.maas.errors import (
    MaasBadResponse,
    MaasError,
    MaasNoAnswer,
    MaasServerError,
    MaasUnreachable,
    error_for,
)
from provision.maas.machine import MaasMachine, parse_machine
from provision.site.credentials import Secret
from provision.state.identifiers import canonical_mac
from provision.state.peer_json import JsonTooDeep, loads
from provision.state.secret_values import hold_maas_key

FormValue = str | Sequence[str]

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
# Failures that happen before any byte of the request is written: safe to re-send whatever the method.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A region's machine list is ~10 KB a machine: 64 MiB is thousands of machines.
MAX_BODY_BYTES = 64 * 1024 * 1024


def multipart(fields: Mapping[str, FormValue]) -> tuple[bytes, str]:
    """Encode a form as multipart/form-data, repeating a field for each value (as MAAS expects)."""
    boundary = uuid.uuid4().hex
    out = bytearray()
    for name, value in fields.items():
        for item in [value] if isinstance(value, str) else value:
            out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            out += item.encode() + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


class MaasClient:
    """One client per MAAS region. The API key is held as a `Secret` and only used to sign."""

    def __init__(
        self,
        url: str,
        api_key: Secret,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        verify: bool | ssl.SSLContext = True,
        transport: httpx.AsyncBaseTransport | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        parts = api_key.reveal().split(":")
        hold_maas_key(api_key.reveal())  # the OAuth header carries the parts, the signature as %26<secret>
        if len(parts) != 3 or not all(parts):
            raise MaasError("the MAAS API key must be consumer_key:token_key:token_secret")
        self._oauth = OAuthClient(
            client_key=parts[0],
            client_secret="",
            resource_owner_key=parts[1],
            resource_owner_secret=parts[2],
            signature_method=SIGNATURE_PLAINTEXT,
            signature_type=SIGNATURE_TYPE_AUTH_HEADER,
        )
        self.base = url.rstrip("/") + "/api/2.0"
        self.retries = retries
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self._http = httpx.AsyncClient(timeout=timeout_s, verify=verify, transport=transport)

    async def __aenter__(self) -> MaasClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._http.aclose()

    def _auth_header(self, url: str, method: str) -> str:
        # PLAINTEXT signs no body; oauthlib adds nonce and timestamp.
        _, headers, _ = self._oauth.sign(url, http_method=method)
        return str(headers["Authorization"])

    async def _request(
        self,
        method: str,
        path: str,
        *,
        op: str | None = None,
        params: Mapping[str, FormValue] | None = None,
        form: Mapping[str, FormValue] | None = None,
        what: str,
    ) -> Any:
        url = f"{self.base}/{path.lstrip('/')}"
        query: list[tuple[str, str]] = [("op", op)] if op else []
        for key, value in (params or {}).items():
            query.extend((key, v) for v in ([value] if isinstance(value, str) else value))
        full = str(httpx.URL(url, params=query))
        body, ctype = multipart(form) if form is not None else (b"", "")
        resend = method in IDEMPOTENT
        delay = 0.5
        for attempt in range(self.retries + 1):
            headers = {"Authorization": self._auth_header(full, method), "Accept": "application/json"}
            if ctype:
                headers["Content-Type"] = ctype
            try:
                status, raw = await self._exchange(method, full, body, headers, what)
            except NOT_SENT as exc:
                error: MaasError = MaasUnreachable(f"MAAS at {self.base} is unreachable ({what}): {type(exc).__name__}")
            except (httpx.TimeoutException, TimeoutError):
                error = MaasNoAnswer(
                    f"MAAS at {self.base} did not answer in time ({what}: {self.timeout_s:g} s deadline)")
                if not resend:
                    raise error from None
            except httpx.HTTPError as exc:
                error = MaasNoAnswer(f"MAAS at {self.base} dropped the request ({what}): {type(exc).__name__}")
                if not resend:
                    raise error from None
            else:
                if status < 400:
                    return None if status == 204 or not raw else self._json(raw, what)
                error = error_for(status, raw.decode("utf-8", errors="replace"), what)
                if not isinstance(error, MaasServerError) or not resend:
                    raise error
            if attempt == self.retries:
                raise error
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    async def _exchange(self, method: str, url: str, body: bytes, headers: Mapping[str, str],
                        what: str) -> tuple[int, bytes]:
        """One attempt under one deadline: the status and the body, streamed under the byte cap."""
        cap = self.max_body_bytes
        async with asyncio.timeout(self.timeout_s), self._http.stream(
                method, url, content=body or None, headers=headers) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > cap:
                raise MaasBadResponse(f"MAAS answered {what} with {declared} bytes, over the {cap}-byte limit")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():  # decoded: a compressed answer is capped as it expands
                size += len(chunk)
                if size > cap:
                    raise MaasBadResponse(f"MAAS's answer to {what} is over the {cap}-byte limit")
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    @staticmethod
    def _json(raw: bytes, what: str) -> Any:
        try:
            return loads(raw, what=what)
        except (RecursionError, JsonTooDeep):
            raise MaasBadResponse(f"MAAS answered {what} with JSON nested too deeply to parse") from None
        except (ValueError, UnicodeDecodeError):
            raise MaasBadResponse(f"MAAS answered {what} with something that is not JSON ({len(raw)} bytes)") from None

    async def version(self) -> str:
        data = await self._request("GET", "version/", what="version")
        return str(data.get("version", "unknown")) if isinstance(data, dict) else "unknown"

    async def machines(self, *, hostnames: Sequence[str] = (), macs: Sequence[str] = ()) -> list[MaasMachine]:
        params: dict[str, FormValue] = {}
        if hostnames:
            params["hostname"] = list(hostnames)
        if macs:
            params["mac_address"] = [canonical_mac(m) or m for m in macs]  # MAAS refuses a non-MAC
        data = await self._request("GET", "machines/", params=params, what="machine list")
        if not isinstance(data, list):
            raise MaasError("MAAS machine list is not a list")
        return [parse_machine(item) for item in data]

    async def machine(self, system_id: str) -> MaasMachine:
        return parse_machine(await self._request("GET", f"machines/{system_id}/", what=f"machine {system_id}"))

    async def create_machine(
        self,
        *,
        hostname: str,
        macs: Sequence[str],
        architecture: str,
        power_type: str,
        power_parameters: Mapping[str, str],
        commission: bool = True,
    ) -> MaasMachine:
        form: dict[str, FormValue] = {
            "hostname": hostname,
            "architecture": architecture,
            "mac_addresses": list(macs),
            "power_type": power_type,
            "commission": "true" if commission else "false",
        }
        form.update({f"power_parameters_{k}": v for k, v in power_parameters.items()})
        lost: MaasError
        try:
            return parse_machine(await self._request("POST", "machines/", form=form, what=f"enlisting {hostname}"))
        except (MaasNoAnswer, MaasServerError) as exc:
            lost = exc
        # The create may have happened: MAAS itself says whether it did (re-sending it would be
        # refused with "MAC already in use" if it had).
        enlisted = await self._enlisted(hostname, macs)
        if enlisted is None:
            raise lost
        return enlisted

    async def _enlisted(self, hostname: str, macs: Sequence[str]) -> MaasMachine | None:
        """The machine MAAS holds under this hostname with one of these MACs, if any (None when MAAS
        cannot be read either)."""
        try:
            found = await self.machines(macs=macs)
        except MaasError:
            return None
        wanted = {mac for mac in map(canonical_mac, macs) if mac}
        return next((m for m in found if m.hostname == hostname and wanted & set(m.macs)), None)

    async def commission(self, system_id: str) -> MaasMachine:
        data = await self._request("POST", f"machines/{system_id}/", op="commission", form={}, what="commission")
        return parse_machine(data)

    async def allocate(self, system_id: str) -> MaasMachine:
        data = await self._request(
            "POST", "machines/", op="allocate", form={"system_id": system_id}, what=f"allocating {system_id}"
        )
        return parse_machine(data)

    async def deploy(self, system_id: str, *, distro_series: str, user_data: str | None = None) -> MaasMachine:
        form: dict[str, FormValue] = {"distro_series": distro_series}
        if user_data:
            form["user_data"] = user_data
        data = await self._request("POST", f"machines/{system_id}/", op="deploy", form=form, what="deploy")
        return parse_machine(data)

    async def release(self, system_id: str) -> MaasMachine:
        data = await self._request("POST", f"machines/{system_id}/", op="release", form={}, what="release")
        return parse_machine(data)
