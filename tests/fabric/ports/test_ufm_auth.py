"""The UFM client's three ways in (`fabric.ufm.auth`), against the UFM stand-in's authentication
(sim/ufm/auth.py) served in this test's own event loop: each kind on its own prefix, as NVIDIA's REST API
guide gives them ("REST API Complementary Information": Basic on /ufmRest, a /dologin session on /ufmRestV2,
an access token on /ufmRestV3), a session UFM dropped logged in again once, and a refused login said in one
line without the password."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from fabric.ufm.client import UfmAuthKind, UfmClient
from fabric.ufm.errors import UfmAuthError
from provision.site.credentials import Login, Secret
from sim.redfish.http import Request, Response, serve
from sim.ufm.auth import SESSION_COOKIE, UfmAuth

PASSWORD = "ufm-auth-Pa55"


@asynccontextmanager
async def ufm(auth: UfmAuth, seen: list[str]) -> AsyncIterator[str]:
    async def handle(request: Request) -> Response:
        seen.append(f"{request.method} {request.path}")
        if request.method == "POST" and request.path == "/dologin":
            session = auth.login(request)
            if session is None:
                return Response(401, b"Unauthorized")
            return Response(200, b"", {"Set-Cookie": f"{SESSION_COOKIE}={session}; Path=/"})
        path = auth.resolve(request)
        if path is None:
            return Response(401, b"Unauthorized")
        return Response.of(200, [] if path == "/ufmRest/app/events" else {"path": path})

    server = await asyncio.start_server(lambda r, w: serve(r, w, handle), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}"


def _read(kind: UfmAuthKind, secret: str, auth: UfmAuth, *, drop_after: int = 0) -> list[str]:
    seen: list[str] = []

    async def go() -> None:
        async with ufm(auth, seen) as url, UfmClient(url, Login("admin", Secret(secret)), auth=kind) as client:
            for i in range(3):
                if drop_after and i == drop_after:
                    auth.drop_sessions()  # UFM's session timeout
                assert await client.events() == "[]"
    asyncio.run(go())
    return seen


def test_basic_credentials_go_to_ufmrest() -> None:
    assert _read("basic", PASSWORD, UfmAuth("admin", PASSWORD)) == ["GET /ufmRest/app/events"] * 3


def test_a_session_logs_in_once_at_dologin_and_reads_ufmrestv2() -> None:
    assert _read("session", PASSWORD, UfmAuth("admin", PASSWORD)) == [
        "POST /dologin", "GET /ufmRestV2/app/events", "GET /ufmRestV2/app/events", "GET /ufmRestV2/app/events"]


def test_a_session_ufm_dropped_is_logged_in_again_once() -> None:
    assert _read("session", PASSWORD, UfmAuth("admin", PASSWORD), drop_after=2) == [
        "POST /dologin", "GET /ufmRestV2/app/events", "GET /ufmRestV2/app/events",
        "GET /ufmRestV2/app/events", "POST /dologin", "GET /ufmRestV2/app/events"]


def test_a_token_is_sent_as_basic_on_ufmrestv3() -> None:
    auth = UfmAuth("admin", PASSWORD)
    token = auth.new_token()
    assert _read("token", token, auth) == ["GET /ufmRestV3/app/events"] * 3


@pytest.mark.parametrize("kind", ["basic", "session", "token"])
def test_a_wrong_credential_is_one_line_without_it(kind: UfmAuthKind) -> None:
    auth = UfmAuth("admin", PASSWORD)
    auth.new_token()
    with pytest.raises(UfmAuthError) as caught:
        _read(kind, "not-the-Secret-42", auth)
    assert "HTTP 401" in str(caught.value) and "not-the-Secret-42" not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_each_prefix_takes_only_its_own_kind_of_credential() -> None:
    auth = UfmAuth("admin", PASSWORD)
    token = auth.new_token()
    basic = Request("GET", "/ufmRestV3/app/events", {"authorization": "Basic YWRtaW46dWZtLWF1dGgtUGE1NQ=="}, b"")
    assert auth.resolve(Request("GET", "/ufmRest/app/events", basic.headers, b"")) == "/ufmRest/app/events"
    assert auth.resolve(basic) is None  # user:password on the token prefix
    assert auth.resolve(Request("GET", "/ufmRest/app/events", {"authorization": f"Basic {token}"}, b"")) is None
    assert auth.resolve(Request("GET", "/ufmRestV3/app/events", {"authorization": f"Basic {token}"}, b"")) == \
        "/ufmRest/app/events"
    login = Request("POST", "/dologin", {}, f"httpd_username=admin&httpd_password={PASSWORD}".encode())
    cookie = {"cookie": f"{SESSION_COOKIE}={auth.login(login)}"}
    assert auth.resolve(Request("GET", "/ufmRestV2/app/events", cookie, b"")) == "/ufmRest/app/events"
    assert auth.resolve(Request("GET", "/ufmRest/app/events", cookie, b"")) is None
    assert auth.resolve(Request("GET", "/ufmRestV9/app/events", cookie, b"")) is None
