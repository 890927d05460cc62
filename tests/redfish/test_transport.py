"""The one-connection transport under the Redfish client: keep-alive reuse, a BMC that closed an idle
connection, `Connection: close`, chunked bodies, answers cut short, and hung BMCs, against a small
scripted HTTP server on loopback (plain HTTP: TLS is the simulator tests' part)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from provision.redfish import ClientOptions, RedfishClient, RedfishTimeout, RedfishUnreachable, first_link
from provision.redfish.transport import BmcTransport

# How the scripted server answers the n-th request it reads on one connection (n from 1): raw bytes to
# send, and whether to close the connection afterwards.
Script = Callable[[int, bytes], Awaitable[tuple[bytes, bool]]]


def ok(body: bytes = b'{"Id": "x"}', *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Server:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                n += 1
                answer, close = await self.script(n, request)
                writer.write(answer)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def client(url: str, **options: Any) -> RedfishClient:
    return RedfishClient(url, None, options=ClientOptions(retries=0, **options), transport=BmcTransport(None))


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_requests_to_one_bmc_share_one_keep_alive_connection() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(b'{"n": %d}' % n), False

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            answers = [(await bmc.get(f"/redfish/v1/x{i}")).data["n"] for i in range(5)]
            await bmc.close()
            assert answers == [1, 2, 3, 4, 5]
            assert server.connections == 1
            assert server.requests[0].startswith(b"GET /redfish/v1/x0 HTTP/1.1\r\n")

    run(go())


def test_the_transport_also_serves_httpx_clients_over_one_connection() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(b'{"n": %d}' % n, "X-Auth-Token: t"), False

    async def go() -> None:
        async with Server(script) as server:
            async with httpx.AsyncClient(transport=BmcTransport(None), base_url=server.url) as http:
                first = await http.get("/redfish/v1/a b", headers={"Accept": "application/json"})
                second = await http.post("/redfish/v1/s", json={"UserName": "u"})
            assert (first.json(), first.headers["x-auth-token"], first.reason_phrase) == ({"n": 1}, "t", "OK")
            assert second.json() == {"n": 2} and server.connections == 1
            assert server.requests[0].startswith(b"GET /redfish/v1/a%20b HTTP/1.1\r\n")
            assert server.requests[1].endswith(b'{"UserName":"u"}')

    run(go())


def test_the_client_sends_the_target_httpx_would_and_its_body_with_a_length() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(), False

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            await bmc.get("/redfish/v1/Systems?$expand=.($levels=1)")
            await bmc.patch("/redfish/v1/Systems/1", {"Boot": {"BootSourceOverrideTarget": "Pxe"}})
            await bmc.close()
            get, patch = server.requests
            assert get.startswith(b"GET /redfish/v1/Systems?$expand=.($levels=1) HTTP/1.1\r\n")
            host = server.url.split("://")[1].encode()
            assert b"\r\nHost: " + host + b"\r\n" in get and b"Content-Length" not in get
            body = b'{"Boot": {"BootSourceOverrideTarget": "Pxe"}}'
            assert patch.startswith(b"PATCH /redfish/v1/Systems/1 HTTP/1.1\r\n") and patch.endswith(body)
            assert b"\r\nContent-Length: %d\r\n" % len(body) in patch
            assert b"\r\nContent-Type: application/json\r\n" in patch

    run(go())


def test_a_connection_the_bmc_closed_while_idle_is_replaced_before_the_next_request() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(), True  # answers, then closes without saying so (no Connection: close)

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            await bmc.get("/redfish/v1/a")
            await asyncio.sleep(0.05)  # the close has arrived by now
            await bmc.get("/redfish/v1/b")
            await bmc.close()
            assert server.connections == 2 and len(server.requests) == 2

    run(go())


def test_a_get_the_bmc_dropped_unanswered_on_a_kept_connection_is_sent_once_more_on_a_new_one() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        # The BMC's idle timer fires just as the second request arrives: closed, nothing answered.
        return (ok(), False) if n == 1 else (b"", True)

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            await bmc.get("/redfish/v1/a")
            assert (await bmc.get("/redfish/v1/b")).data == {"Id": "x"}
            await bmc.close()
            assert server.connections == 2
            assert [r.split(b" ")[1] for r in server.requests] == [b"/redfish/v1/a", b"/redfish/v1/b", b"/redfish/v1/b"]

    run(go())


def test_a_post_is_not_sent_twice_when_the_connection_dies_under_it() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return (ok(), False) if n == 1 else (b"", True)  # as above, the second request goes unanswered

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            await bmc.get("/redfish/v1/a")
            with pytest.raises(RedfishUnreachable, match="closed the connection without answering"):
                await bmc.post("/redfish/v1/Actions/Reset", {"ResetType": "On"})
            await bmc.close()
            assert sum(r.startswith(b"POST") for r in server.requests) == 1

    run(go())


def test_connection_close_from_the_bmc_means_a_new_connection_for_the_next_request() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(b"{}", "Connection: close"), False  # says close; the transport must not reuse it

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            await bmc.get("/redfish/v1/a")
            await bmc.get("/redfish/v1/b")
            await bmc.close()
            assert server.connections == 2

    run(go())


def test_chunked_answers_are_read_whole_and_the_connection_kept() -> None:
    body = b'{"Members": [], "Name": "chunked"}'

    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]))
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunks + b"0\r\n\r\n"), False

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            assert (await bmc.get("/redfish/v1/a")).data["Name"] == "chunked"
            assert (await bmc.get("/redfish/v1/b")).data["Name"] == "chunked"
            await bmc.close()
            assert server.connections == 1

    run(go())


def test_an_answer_cut_short_is_an_error_and_the_next_request_works() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        if b"/cut" in request:
            return ok(b'{"Id": "x"}')[:-4], True  # Content-Length promises more than arrives
        return ok(), False

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url)
            with pytest.raises(RedfishUnreachable, match="complete message body"):
                await bmc.get("/redfish/v1/cut")
            assert (await bmc.get("/redfish/v1/a")).data == {"Id": "x"}
            await bmc.close()
            assert server.connections == 2

    run(go())


def test_an_oversized_answer_is_refused_and_its_connection_not_reused() -> None:
    from provision.redfish import RedfishProtocolError

    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        body = b'{"pad": "' + b"x" * 5000 + b'"}' if b"/big" in request else b"{}"
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # no Content-Length to judge by
                + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)), False

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url, max_body_bytes=1000)
            with pytest.raises(RedfishProtocolError, match="1000-byte limit"):
                await bmc.get("/redfish/v1/big")
            assert (await bmc.get("/redfish/v1/small")).data == {}
            await bmc.close()
            assert server.connections == 2  # the half-read answer's connection was dropped

    run(go())


def test_a_bmc_that_never_answers_times_out_saying_the_request_was_sent_and_nothing_came_back() -> None:
    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        await asyncio.sleep(60)
        return b"", True

    async def go() -> None:
        async with Server(script) as server:
            bmc = client(server.url, timeout_s=0.3)
            with pytest.raises(RedfishTimeout, match=r"request sent, awaiting the answer, 0 bytes of answer"):
                await bmc.get("/redfish/v1/a")
            await bmc.close()

    run(go())


def test_a_bmc_that_stops_in_the_middle_of_a_body_times_out_saying_how_much_came() -> None:
    answer = ok(b'{"Id": "x", "Pad": "0123456789"}')

    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        raise AssertionError("the stalling server answers by itself")

    class Stalling(Server):
        async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer[:-10])  # the head and part of the body, then nothing
            await writer.drain()
            await asyncio.sleep(60)

    async def go() -> None:
        async with Stalling(script) as server:
            bmc = client(server.url, timeout_s=0.3)
            sent = rf"reading the body, {len(answer) - 10} bytes of answer \(request 1 on connection 1\)"
            with pytest.raises(RedfishTimeout, match=sent):
                await bmc.get("/redfish/v1/a")
            await bmc.close()

    run(go())


def test_nothing_listening_is_unreachable() -> None:
    async def go() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        bmc = client(f"http://127.0.0.1:{port}")
        with pytest.raises(RedfishUnreachable, match="connection failed"):
            await bmc.get("/redfish/v1/")
        await bmc.close()

    run(go())


@pytest.mark.parametrize("lean", [True, False], ids=["lean-transport", "httpx-transport"])
def test_with_retries_a_post_the_bmc_may_have_read_is_still_sent_once_and_a_get_is_sent_again(lean: bool) -> None:
    dropped: list[bytes] = []

    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        # The first time each path is asked, the BMC reads the request and drops the connection.
        path = request.split(b" ")[1]
        if path not in dropped:
            dropped.append(path)
            return b"", True
        return ok(), False

    async def go() -> None:
        async with Server(script) as server:
            options = ClientOptions(retries=2, backoff_s=0.01, backoff_max_s=0.01)
            transport = BmcTransport(None) if lean else httpx.AsyncHTTPTransport()
            bmc = RedfishClient(server.url, None, options=options, transport=transport)
            with pytest.raises(RedfishUnreachable):
                await bmc.post("/redfish/v1/Actions/Reset", {"ResetType": "ForceRestart"})
            assert (await bmc.get("/redfish/v1/a")).data == {"Id": "x"}
            await bmc.close()
            assert sum(r.startswith(b"POST") for r in server.requests) == 1
            assert sum(r.startswith(b"GET /redfish/v1/a ") for r in server.requests) == 2

    run(go())


@pytest.mark.parametrize("lean", [True, False], ids=["lean-transport", "httpx-transport"])
def test_a_hostile_bmcs_network_path_link_is_requested_from_that_bmc_never_another_host(lean: bool) -> None:
    # first_link takes any link starting with "/" (provision/redfish/resource.py); "//evil.example/x" is, in a
    # URL, another host (RFC 3986 4.2): the client must still send it to the BMC it was built for.
    link = first_link({"Links": {"ManagedBy": [{"@odata.id": "//evil.example/x"}]}}, "Links", "ManagedBy")

    async def script(n: int, request: bytes) -> tuple[bytes, bool]:
        return ok(), False

    async def go() -> None:
        async with Server(script) as server:
            transport = BmcTransport(None) if lean else httpx.AsyncHTTPTransport()
            bmc = RedfishClient(server.url, None, options=ClientOptions(retries=0), transport=transport)
            assert link is not None and (await bmc.get(link)).data == {"Id": "x"}
            await bmc.close()
            [request] = server.requests
            assert b"\r\nHost: " + server.url.split("://")[1].encode() + b"\r\n" in request
            # A path on this BMC as each transport writes it: the lean one as httpx reads the link alone, httpx
            # as the BMC's URL followed by the link.
            assert request.split(b" ")[1] == (b"/x" if lean else b"//evil.example/x")

    run(go())
