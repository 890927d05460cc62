"""The lab's perftest simulator for the test hosts: `python -m sim.testhosts.perftest_service --site S --faults F
--listen ADDRESS:PORT`.

Each connection is one `ib_write_bw` process on a test host (sim/testhosts/perftest_client.py): one JSON line
`{"host": NAME, "argv": [...]}` in, one JSON object `{"rc", "out", "err"}` back when the run ends. The run is
the SSH-host simulator's (sim/sshhosts/perftest_session.py over perftest_sim.Traffic: the site's fabric in
ibsim, its link faults, the host's `perftest:` fault); the client closing its connection (killed by `timeout`
or `pkill`) is the process going away. A `drop` fault closes the connection without an answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from fabric.diags import DIAGS_ENV
from provision.errors import BringupError
from provision.site import load_site
from sim.addresses import check_loopback
from sim.site_paths import ibsim_state
from sim.sshhosts.faults import Faults, load_faults
from sim.sshhosts.linkfaults import FILE_NAME, load_link_faults
from sim.sshhosts.perftest_session import handle
from sim.sshhosts.perftest_sim import Traffic, parse_invocation

REQUEST_LIMIT = 64 * 1024
REQUEST_TIMEOUT_S = 10.0


class _Connection:
    """The client process as perftest_session sees it: closing once its connection reaches end of file."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.closed = False
        self._watch = asyncio.ensure_future(self._drain(reader))

    async def _drain(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(4096):
                pass
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def cancel(self) -> None:
        self._watch.cancel()


async def _session(traffic: Traffic, faults: Faults, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    try:
        line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
        request = json.loads(line[:REQUEST_LIMIT])
        host, argv = str(request["host"]), [str(a) for a in request["argv"]]
    except (TimeoutError, ValueError, KeyError, TypeError, ConnectionError):
        writer.close()
        return
    inv = parse_invocation(shlex.join(["ib_write_bw", *argv]))
    connection = _Connection(reader)
    try:
        if inv is None:
            result: tuple[int, str, str] | None = (1, "", " Invalid command line options\n")
        else:
            result = await handle(traffic, host, inv, connection, faults.for_host(host).perftest)
        if result is not None and not connection.closed:
            rc, out, err = result
            writer.write(json.dumps({"rc": rc, "out": out, "err": err}).encode())
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        connection.cancel()
        writer.close()


async def _serve(traffic: Traffic, faults: Faults, address: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(lambda r, w: _session(traffic, faults, r, w), address, port,
                                        reuse_address=True, limit=REQUEST_LIMIT)
    print(f"perftest simulator on {address}:{port}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.testhosts.perftest_service", description=__doc__)
    parser.add_argument("--site", required=True, type=Path)
    parser.add_argument("--faults", required=True, type=Path, help="the site's health-faults file")
    parser.add_argument("--listen", required=True, help="ADDRESS:PORT on loopback")
    args = parser.parse_args(argv)
    address, _, port = args.listen.rpartition(":")
    try:
        check_loopback(address)
        site = load_site(args.site)
        faults = load_faults(args.faults)
        link_faults = load_link_faults(site.directory / FILE_NAME)
    except BringupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    state = os.environ.get(DIAGS_ENV)
    traffic = Traffic(Path(state) if state else ibsim_state(site.paths), site.fabric_design, link_faults)
    asyncio.run(_serve(traffic, faults, address, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
