"""The MAAS client against hostile regions (HTTP on loopback): each answer ends in a typed `MaasError`
within the client's deadline, never a hang, never more read than its cap, never the API key shown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from provision.maas.client import MaasClient
from provision.maas.errors import MaasBadResponse, MaasError, MaasNoAnswer
from provision.maas.step import MaasDeployStep
from provision.site.credentials import Secret
from provision.steps.pipeline import MAAS_DEPLOY
from tests.hostile.peers import (
    Behaviour,
    MiB,
    answer,
    deep_json,
    drip,
    echo_in_status_line,
    endless_header,
    flood,
    peer,
    raw,
    stall,
)

KEY = "hostileck:hostiletk:hostile-token-secret-4711"
SECRET_PART = "hostile-token-secret-4711"
DEADLINE_S = 1.0
CAP = 1 * MiB


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 15))  # the test's own bound, far past the client's


async def _against(behaviour: Behaviour, *, retries: int = 0,
                   cap: int | None = None) -> tuple[BaseException, float, int]:
    """Ask a hostile region for its version: (the error, seconds it took, bytes the region got out).
    Without `cap` the client's own default cap holds."""
    async with peer([behaviour]) as region:
        options: dict[str, Any] = {} if cap is None else {"max_body_bytes": cap}
        client = MaasClient(f"http://127.0.0.1:{region.port}/MAAS/", Secret(KEY), timeout_s=DEADLINE_S,
                            retries=retries, **options)
        started = time.monotonic()
        async with client:
            with pytest.raises(MaasError) as info:
                await client.version()
        return info.value, time.monotonic() - started, region.sent


def _clean(error: BaseException, reason: str | None = None) -> None:
    """No part of the key in what the error says; with `reason`: the deploy step's triage of it."""
    for text in (str(error), repr(error), repr(error.args)):
        assert SECRET_PART not in text and KEY not in text
    if reason is not None:
        step = MaasDeployStep.__new__(MaasDeployStep)  # triage reads nothing of the step's state
        assert step.triage(error, 60.0).reason == reason and reason in MAAS_DEPLOY.reasons


def test_a_region_answering_a_byte_a_second_is_cut_off_at_the_deadline() -> None:
    # Each byte comes well within httpx's per-read timeout: only an overall deadline ends this.
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
    error, took, _ = _run(_against(drip(head, interval_s=0.1)))
    assert isinstance(error, MaasNoAnswer) and "did not answer in time" in str(error)
    assert took < DEADLINE_S + 1.0
    _clean(error, "maas_unreachable")


def test_a_100_mb_answer_is_refused_at_the_cap_not_read_whole() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    error, took, sent = _run(_against(flood(head), cap=CAP))
    assert isinstance(error, MaasBadResponse) and f"over the {CAP}-byte limit" in str(error)
    assert sent < CAP + 16 * MiB  # the cap plus what the kernel's socket buffers took, not 100 MB
    assert took < DEADLINE_S + 1.0
    _clean(error, "maas_error")


def test_a_declared_100_mb_answer_is_refused_before_its_body_is_read() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n"
    error, _, sent = _run(_against(flood(head)))
    assert isinstance(error, MaasBadResponse) and "104857600 bytes, over the 67108864-byte limit" in str(error)
    assert sent < 16 * MiB


def test_deeply_nested_json_is_a_bad_response_not_a_recursion_error() -> None:
    error, _, _ = _run(_against(deep_json()))
    assert isinstance(error, MaasBadResponse) and "nested too deeply" in str(error)
    _clean(error, "maas_error")


def test_deeply_nested_json_in_a_400_answer_is_still_a_maas_error() -> None:
    error, _, _ = _run(_against(answer(400, b"[" * 100_000 + b"]" * 100_000)))
    assert isinstance(error, MaasError) and "rejected" in str(error)


def test_an_answer_that_is_not_json_is_a_bad_response() -> None:
    error, _, _ = _run(_against(answer(200, b"<html>proxy error</html>", ctype=b"text/html")))
    assert isinstance(error, MaasBadResponse) and "not JSON" in str(error)


@pytest.mark.parametrize("behaviour", [raw(b"\x00\x17garbage\xff"), raw(b"HTTP/1.1 2x0 OK\r\n\r\n"),
                                       raw(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"), endless_header(),
                                       stall(), echo_in_status_line()],
                         ids=["garbage", "bad-status", "negative-length", "endless-header", "stall", "echo"])
def test_malformed_or_missing_answers_end_in_a_typed_error_within_the_deadline(behaviour: Behaviour) -> None:
    error, took, sent = _run(_against(behaviour))
    assert isinstance(error, MaasError)
    assert took < DEADLINE_S + 1.0
    assert sent < 16 * MiB
    _clean(error, "maas_unreachable" if isinstance(error, MaasNoAnswer) else "maas_error")


def test_the_deadline_holds_for_every_retry_of_an_idempotent_request() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"
    error, took, _ = _run(_against(drip(head, interval_s=0.1), retries=1))
    assert isinstance(error, MaasNoAnswer)
    assert took < 2 * DEADLINE_S + 0.5 + 1.0  # two deadlines and the backoff between them


def test_a_100_mb_answer_stops_at_the_default_cap() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    error, _, sent = _run(_against(flood(head)))
    assert isinstance(error, MaasError) and "over the 67108864-byte limit" in str(error)
    assert sent < 64 * MiB + 16 * MiB < 100 * MiB
