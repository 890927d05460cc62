"""The Redfish client against hostile BMCs (HTTPS on loopback): every answer ends in a typed
`RedfishError` whose reason says what happened (a malformed answer is `bmc_bad_response`, not a cabling
fault or a timeout), within the client's deadline, never past its body cap, never with the password."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from provision.redfish import RedfishClient
from provision.redfish.client import ClientOptions
from provision.redfish.errors import RedfishError
from provision.site.credentials import Login, Secret
from provision.steps.pipeline import HARVEST, remediation_for
from tests.hostile.peers import (
    Behaviour,
    MiB,
    answer,
    deep_json,
    drip,
    echo_in_status_line,
    endless_header,
    flood,
    json_answer,
    peer,
    raw,
    server_tls,
    stall,
)

PASSWORD = "hostile-bmc-pass-2718"
BASIC = base64.b64encode(f"root:{PASSWORD}".encode()).decode()
DEADLINE_S = 1.0
CAP = 1 * MiB
ROOT = json_answer({"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"}})


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    return server_tls(Path(tmp_path_factory.mktemp("hostile-bmc-tls")))


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 15))  # the test's own bound, far past the client's


async def _against(behaviour: Behaviour, tls: tuple[ssl.SSLContext, ssl.SSLContext], *, cap: int | None = None,
                   members: bool = False) -> tuple[RedfishError, float, int]:
    """Open a session with a BMC whose service root is sound (read without credentials), then GET its
    Systems with Basic auth and get `behaviour`: (the error, seconds the GET took, bytes the BMC got out).
    `members`: read Systems as a collection (its members and further pages)."""
    server_ctx, client_ctx = tls
    options = ClientOptions(timeout_s=DEADLINE_S, retries=0, auth="basic",
                            max_body_bytes=ClientOptions.max_body_bytes if cap is None else cap)
    async with peer([ROOT, behaviour], tls=server_ctx) as bmc:
        client = RedfishClient(f"https://127.0.0.1:{bmc.port}", Login("root", Secret(PASSWORD)), tls=client_ctx,
                               options=options)
        async with client:
            started = time.monotonic()
            with pytest.raises(RedfishError) as info:
                await (client.members("/redfish/v1/Systems") if members else client.get("/redfish/v1/Systems"))
            took = time.monotonic() - started
        assert BASIC.encode() in bmc.requests[-1]  # the credential was in flight
        return info.value, took, bmc.sent


def _bad_response(error: RedfishError, detail: str) -> None:
    assert error.reason == "bmc_bad_response", f"{error.reason}: {error}"
    assert detail in str(error)
    assert remediation_for(error.reason) and "bmc_bad_response" in HARVEST.reasons
    for text in (str(error), repr(error), repr(error.evidence())):
        assert PASSWORD not in text and BASIC not in text


@pytest.mark.parametrize(("behaviour", "detail"), [
    (raw(b"HTTP/1.1 2x0 OK\r\n\r\n"), "malformed HTTP answer: bad status line"),
    (raw(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"), "malformed HTTP answer: bad Content-Length header"),
    (endless_header(), "malformed HTTP answer: header block over 16 KiB without an end"),
    (raw(b"\x00\x17garbage\xff"), "malformed HTTP answer"),
    (raw(b"SSH-2.0-OpenSSH_9.6\r\n"), "the answer does not start with an HTTP status line"),
    (echo_in_status_line(), "malformed HTTP answer: bad status line"),
], ids=["bad-status-line", "negative-content-length", "100MB-header", "garbage", "another-service", "echo"])
def test_a_malformed_answer_is_a_bad_response_with_what_was_wrong(
        behaviour: Behaviour, detail: str, tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    error, took, sent = _run(_against(behaviour, tls))
    _bad_response(error, detail)
    assert took < DEADLINE_S  # at once, not when the deadline runs out
    assert sent < 16 * MiB


def test_deeply_nested_json_is_a_bad_response_not_a_recursion_error(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    error, _, _ = _run(_against(deep_json(), tls))
    _bad_response(error, "answer is JSON nested too deeply to parse")


def test_a_100_mb_answer_stops_at_the_cap(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    error, took, sent = _run(_against(flood(head), tls, cap=CAP))
    _bad_response(error, f"over the {CAP}-byte limit")
    assert sent < CAP + 16 * MiB and took < DEADLINE_S


def test_a_bmc_answering_a_byte_at_a_time_is_cut_off_at_the_deadline(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
    error, took, _ = _run(_against(drip(head, interval_s=0.1), tls))
    assert error.reason == "bmc_timeout" and "bytes of answer" in str(error)
    assert took < DEADLINE_S + 0.5
    assert PASSWORD not in str(error) and BASIC not in str(error)


def test_a_bmc_that_never_answers_is_a_timeout(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    error, took, _ = _run(_against(stall(), tls))
    assert error.reason == "bmc_timeout" and "0 bytes of answer" in str(error)
    assert took < DEADLINE_S + 0.5


def test_a_bmc_that_hangs_up_without_answering_is_still_unreachable_not_a_bad_response(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    async def hang_up(p: Any, _: bytes, w: asyncio.StreamWriter) -> None:
        w.close()

    error, _, _ = _run(_against(hang_up, tls))
    assert error.reason == "bmc_unreachable"


def test_a_bmc_that_hangs_up_in_the_middle_of_its_head_is_unreachable_too(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    error, _, _ = _run(_against(raw(b"HTTP/1.1 200 OK\r\nContent-Le", then_stall=False), tls))
    assert error.reason == "bmc_unreachable"


def test_a_400_answer_with_deeply_nested_json_is_still_the_bmc_refusing_the_request(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    error, _, _ = _run(_against(answer(400, b"[" * 100_000 + b"]" * 100_000), tls))
    assert error.reason == "bmc_rejected"


def test_collection_pages_that_link_back_are_refused_not_followed_forever(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    page = json_answer({"@odata.id": "/redfish/v1/Systems", "Members": [],
                        "Members@odata.nextLink": "/redfish/v1/Systems?$skip=0"})
    error, took, _ = _run(_against(page, tls, members=True))
    _bad_response(error, "Members@odata.nextLink leads back to /redfish/v1/Systems?$skip=0")
    assert took < DEADLINE_S


def test_a_collection_of_more_members_than_any_bmc_has_is_refused_before_any_is_fetched(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    links = [{"@odata.id": f"/redfish/v1/Systems/{i}"} for i in range(20_000)]
    error, took, _ = _run(_against(json_answer({"@odata.id": "/redfish/v1/Systems", "Members": links}), tls,
                                   members=True))
    _bad_response(error, "the collection has more than 10000 members")
    assert took < DEADLINE_S
