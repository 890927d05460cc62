"""The Redfish client against scripted BMC answers: retries, typed errors, bad bodies, sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from provision.redfish import (
    ClientOptions,
    RedfishAuthError,
    RedfishClient,
    RedfishNotFound,
    RedfishProtocolError,
    RedfishServerError,
    RedfishTimeout,
    RedfishUnsupported,
)
from provision.site.credentials import Login, Secret

PASSWORD = "Sup3r-Secret-pw"
ROOT = {"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"},
        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}}
FAST = ClientOptions(timeout_s=2.0, retries=2, backoff_s=0.01, backoff_max_s=0.02)
Handler = Callable[[httpx.Request], Any]


def client(handler: Handler, options: ClientOptions = FAST) -> RedfishClient:
    return RedfishClient("https://bmc.test", Login("root", Secret(PASSWORD)), options=options,
                         transport=httpx.MockTransport(handler))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def basic_only(extra: Callable[[httpx.Request], httpx.Response | None]) -> Handler:
    """A BMC without sessions: the root has no session link, every other answer comes from `extra`."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/redfish/v1/":
            return httpx.Response(200, json={"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"}})
        resp = extra(request)
        assert resp is not None
        return resp

    return handler


def test_5xx_is_retried_with_backoff_then_succeeds() -> None:
    calls: list[str] = []

    def extra(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) < 3:
            return httpx.Response(503, json={"error": {"@Message.ExtendedInfo": [{"Message": "busy"}]}})
        return httpx.Response(200, json={"Members": []})

    async def go() -> Any:
        async with client(basic_only(extra)) as bmc:
            return await bmc.get("/redfish/v1/Systems")

    assert run(go()).data == {"Members": []}
    assert len(calls) == 3


def test_5xx_gives_up_after_the_bounded_retries_with_the_bmc_message() -> None:
    calls = []

    def extra(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(500, json={"error": {"@Message.ExtendedInfo": [
            {"Message": "Internal error", "MessageId": "Base.1.8.InternalError", "Resolution": "Reset the iDRAC."}]}})

    async def go() -> None:
        async with client(basic_only(extra)) as bmc:
            await bmc.get("/redfish/v1/Systems")

    with pytest.raises(RedfishServerError) as info:
        run(go())
    assert len(calls) == 3
    assert info.value.reason == "bmc_error_5xx"
    assert "Internal error Resolution: Reset the iDRAC." in str(info.value)
    assert info.value.message_ids == ("Base.1.8.InternalError",)


def test_401_is_never_retried_and_the_password_is_in_no_error() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/redfish/v1/":
            return httpx.Response(200, json=ROOT)
        calls.append(request.url.path)
        return httpx.Response(401, json={"error": {"@Message.ExtendedInfo": [{"Message": "Bad credentials"}]}})

    with pytest.raises(RedfishAuthError) as info:
        run(client(handler).__aenter__())
    assert calls == ["/redfish/v1/SessionService/Sessions"]
    assert info.value.reason == "bmc_auth"
    text = str(info.value) + json.dumps(info.value.evidence()) + repr(info.value)
    assert "Bad credentials" in text
    assert PASSWORD not in text


def test_session_token_is_used_then_deleted() -> None:
    seen: list[tuple[str, str, str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.headers.get("X-Auth-Token"),
                     request.headers.get("Authorization")))
        if request.url.path == "/redfish/v1/":
            return httpx.Response(200, json=ROOT)
        if request.method == "POST":
            body = json.loads(request.content)
            assert body == {"UserName": "root", "Password": PASSWORD}
            return httpx.Response(201, json={"@odata.id": "/redfish/v1/SessionService/Sessions/7"},
                                  headers={"X-Auth-Token": "tok", "Location": "/redfish/v1/SessionService/Sessions/7"})
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, json={"Members": []})

    async def go() -> None:
        async with client(handler) as bmc:
            await bmc.get("/redfish/v1/Systems")

    run(go())
    assert ("GET", "/redfish/v1/Systems", "tok", None) in seen
    assert seen[-1] == ("DELETE", "/redfish/v1/SessionService/Sessions/7", "tok", None)


def test_without_a_session_service_basic_auth_is_used() -> None:
    auth = []

    def extra(request: httpx.Request) -> httpx.Response:
        auth.append(request.headers.get("Authorization", ""))
        return httpx.Response(200, json={"Members": []})

    async def go() -> None:
        async with client(basic_only(extra)) as bmc:
            await bmc.get("/redfish/v1/Systems")

    run(go())
    assert auth and auth[0].startswith("Basic ")


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (httpx.Response(200, text="<html>iDRAC login</html>", headers={"Content-Type": "text/html"}),
         "not JSON"),
        (httpx.Response(200, text='{"Members": [', headers={"Content-Type": "application/json"}), "not JSON"),
        (httpx.Response(200, json=[1, 2, 3]), "not an object"),
        (httpx.Response(200, content=b"{" + b" " * 5000 + b"}"), "over the 4096-byte limit"),
        (httpx.Response(301, headers={"Location": "https://elsewhere.test/redfish/v1/Systems"}),
         "redirected to https://elsewhere.test"),
    ],
)
def test_bad_answers_are_clear_protocol_errors(response: httpx.Response, match: str) -> None:
    async def go() -> None:
        opts = ClientOptions(timeout_s=2.0, retries=0, max_body_bytes=4096)
        async with client(basic_only(lambda _req: response), opts) as bmc:
            await bmc.get("/redfish/v1/Systems")

    with pytest.raises(RedfishProtocolError, match=match) as info:
        run(go())
    assert info.value.reason == "bmc_bad_response"


def test_status_codes_map_to_typed_errors() -> None:
    codes = {"/nf": 404, "/na": 405}

    async def go(path: str) -> None:
        async with client(basic_only(lambda req: httpx.Response(codes[req.url.path]))) as bmc:
            await bmc.get(path)

    with pytest.raises(RedfishNotFound):
        run(go("/nf"))
    with pytest.raises(RedfishUnsupported):
        run(go("/na"))


def test_a_bmc_that_never_answers_is_a_timeout_not_a_hang() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200)

    async def go() -> None:
        async with client(handler, ClientOptions(timeout_s=0.2, retries=2)) as bmc:
            await bmc.get("/redfish/v1/Systems")

    with pytest.raises(RedfishTimeout) as info:
        run(go())
    assert info.value.reason == "bmc_timeout"


def test_expand_is_only_asked_for_when_the_service_root_offers_it() -> None:
    targets: list[str] = []
    root_with_expand = {**ROOT, "Links": {}, "ProtocolFeaturesSupported": {
        "ExpandQuery": {"NoLinks": True, "Levels": True, "MaxLevels": 2}}}

    def handler_for(root: dict[str, Any]) -> Handler:
        def handler(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/redfish/v1/":
                return httpx.Response(200, json=root)
            targets.append(str(request.url.params.get("$expand")))
            return httpx.Response(200, json={"Members": []})
        return handler

    async def go(root: dict[str, Any]) -> None:
        async with client(handler_for(root)) as bmc:
            await bmc.members("/redfish/v1/Systems", levels=3)

    run(go(root_with_expand))
    run(go({**ROOT, "Links": {}}))
    assert targets == [".($levels=2)", "None"]


def test_expand_refused_despite_the_advertisement_falls_back_to_following_links() -> None:
    asked: list[str] = []
    root = {**ROOT, "Links": {}, "ProtocolFeaturesSupported": {"ExpandQuery": {"NoLinks": True, "Levels": True}}}
    members = {"/redfish/v1/Systems/1": {"@odata.id": "/redfish/v1/Systems/1", "Id": "1"},
               "/redfish/v1/Systems/2": {"@odata.id": "/redfish/v1/Systems/2", "Id": "2"}}

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url.raw_path.decode()))
        if request.url.path == "/redfish/v1/":
            return httpx.Response(200, json=root)
        if "$expand" in request.url.params:
            return httpx.Response(501, json={"error": {"message": "Querying is not supported."}})
        if request.url.path == "/redfish/v1/Systems":
            return httpx.Response(200, json={"Members": [{"@odata.id": m} for m in members]})
        return httpx.Response(200, json=members[request.url.path])

    async def go() -> list[list[str]]:
        async with client(handler) as bmc:
            return [[str(m.data["Id"]) for m in await bmc.members("/redfish/v1/Systems")] for _ in range(2)]

    assert run(go()) == [["1", "2"], ["1", "2"]]
    assert [a for a in asked if "$expand" in a] == ["/redfish/v1/Systems?$expand=.($levels=1)"]  # asked once only


def test_when_one_member_fails_the_other_requests_are_cancelled_and_the_error_is_raised_as_itself() -> None:
    finished: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/redfish/v1/":
            return httpx.Response(200, json={"@odata.id": "/redfish/v1"})
        if path == "/redfish/v1/Things":
            return httpx.Response(200, json={"Members": [{"@odata.id": "/redfish/v1/Things/gone"},
                                                         {"@odata.id": "/redfish/v1/Things/slow"}]})
        if path.endswith("/gone"):
            return httpx.Response(404, json={})
        await asyncio.sleep(5)  # a slow BMC answer that no one needs any more
        finished.append(path)
        return httpx.Response(200, json={"Id": "slow"})

    async def go() -> None:
        before = asyncio.all_tasks()
        async with client(handler, ClientOptions(timeout_s=10, retries=0)) as bmc:
            with pytest.raises(RedfishNotFound):
                await bmc.members("/redfish/v1/Things")
            assert asyncio.all_tasks() - before == set()  # the slow request is not left running
        assert finished == []

    run(asyncio.wait_for(go(), 30))
