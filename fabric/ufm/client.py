"""A typed async client of UFM Enterprise's REST API (httpx), and the `Actuator` that disables ports with it.

Authentication as NVIDIA's REST API guide gives it ("REST API Complementary Information"): HTTP Basic on
`/ufmRest/...` (`curl -k https://<ufm-ip>/ufmRest/resources/systems -u <user>:<password>`). TLS follows the
site (`fabric.ufm.verify_tls`, `ca_bundle`). Every request has a deadline and every answer a size bound;
statuses become errors in one place (`fabric.ufm.errors.error_for_status`). The password is a `Secret`,
revealed only into httpx's auth; it is in no URL, message or log line.

Endpoints: `GET /ufmRest/app/events`, `GET /ufmRest/resources/ports` (and `/ports/<name>`), `GET
/ufmRest/resources/links`, and port disable/enable through the Actions REST API (`POST /ufmRest/actions`
with `{"action": "disable"|"enable", "params": {"port_id": "<guid>_<port>"}, "object_ids": ["<guid>"],
"object_type": "System", "identifier": "id"}`, answered 202).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import httpx

from fabric.ports.actuate import PortStatus
from fabric.speeds import normalise_speed, normalise_width
from fabric.topology import End
from fabric.ufm.errors import UfmProtocolError, UfmTimeout, UfmUnavailable, error_for_status
from provision.site.credentials import Login

MAX_BODY = 64 << 20  # a 12,000-cable fabric's ports list is tens of MB


def tls_context(verify: bool, ca_bundle: Path | None) -> ssl.SSLContext | bool:
    if not verify:
        return False
    if ca_bundle is not None:
        return ssl.create_default_context(cafile=str(ca_bundle))
    return True


class UfmClient:
    def __init__(self, url: str, login: Login, *, verify: bool = True, ca_bundle: Path | None = None,
                 timeout_s: float = 30.0, max_body: int = MAX_BODY) -> None:
        self.base = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_body = max_body
        self._http = httpx.AsyncClient(base_url=self.base, auth=(login.username, login.password.reveal()),
                                       verify=tls_context(verify, ca_bundle), timeout=timeout_s,
                                       follow_redirects=False)

    async def __aenter__(self) -> UfmClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        what = f"{method} {path}"
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._http.stream(method, path, json=body) as answer:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in answer.aiter_bytes():
                        size += len(chunk)
                        if size > self.max_body:
                            raise UfmProtocolError(f"{what}: answer larger than {self.max_body} bytes")
                        chunks.append(chunk)
                    text = b"".join(chunks).decode("utf-8", errors="replace")
        except TimeoutError:
            raise UfmTimeout(f"{what}: UFM did not answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as e:
            raise UfmUnavailable(f"{what}: cannot reach UFM at {self.base}: {type(e).__name__}") from None
        error = error_for_status(answer.status_code, what, text)
        if error is not None:
            raise error
        return answer.status_code, text

    async def get_text(self, path: str) -> str:
        return (await self._request("GET", path))[1]

    async def events(self) -> str:
        return await self.get_text("/ufmRest/app/events")

    async def ports(self) -> str:
        return await self.get_text("/ufmRest/resources/ports")

    async def links(self) -> str:
        return await self.get_text("/ufmRest/resources/links")

    async def port(self, end: End) -> dict[str, Any]:
        text = await self.get_text(f"/ufmRest/resources/ports/{end.guid}_{end.port}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise UfmProtocolError(f"GET /ufmRest/resources/ports/{end.guid}_{end.port}: not JSON") from None
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict):
            raise UfmProtocolError(f"port {end.guid}_{end.port}: expected one port object")
        return data

    async def port_action(self, end: End, action: str) -> None:
        body = {"params": {"port_id": f"{end.guid}_{end.port}"}, "action": action, "object_ids": [end.guid],
                "object_type": "System", "description": f"bringup fabric ports: {action}", "identifier": "id"}
        await self._request("POST", "/ufmRest/actions", body)


def port_status(end: End, obj: dict[str, Any]) -> PortStatus:
    """A UFM port object as a `PortStatus` (physical_state, logical_state, active_width, active_speed)."""
    phys = str(obj.get("physical_state") or "")
    if not phys:
        raise UfmProtocolError(f"port {end.guid}_{end.port}: UFM gave no physical_state")
    width = normalise_width(str(obj["active_width"])) if obj.get("active_width") else None
    speed = normalise_speed(str(obj["active_speed"])) if obj.get("active_speed") else None
    logical = str(obj["logical_state"]) if obj.get("logical_state") else None
    return PortStatus(end, phys.replace(" ", ""), logical, width, speed)


class UfmActuator:
    """Ports changed through UFM, which reaches both ends of every link (it is the subnet manager)."""

    via = "ufm"

    def __init__(self, client: UfmClient) -> None:
        self.client = client

    def reaches(self, end: End, is_switch: bool) -> bool:
        return True

    async def status(self, end: End) -> PortStatus:
        return port_status(end, await self.client.port(end))

    async def set_enabled(self, end: End, enabled: bool) -> None:
        await self.client.port_action(end, "enable" if enabled else "disable")
