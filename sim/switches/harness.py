"""Run the switch simulator on a thread of this process (tests, bench): listening inside the block, stopped
when it ends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from sim.switches.server import serve, switches_from


@contextlib.contextmanager
def running(asbuilt: dict[str, Any], password: str, timeout: float = 10.0) -> Iterator[None]:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    errors: list[Exception] = []

    async def main() -> None:
        try:
            await serve(switches_from(asbuilt), asbuilt["username"], password, started.set)
        except Exception as e:  # a bind that failed: reported to the caller below
            errors.append(e)
            started.set()

    task = loop.create_task(main())

    async def end_sessions() -> None:
        sessions = asyncio.all_tasks() - {asyncio.current_task()}
        for t in sessions:
            t.cancel()
        await asyncio.gather(*sessions, return_exceptions=True)

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
        loop.run_until_complete(end_sessions())  # the sessions still open when the block ends end with it

    thread = threading.Thread(target=run, name="sim-switches", daemon=True)
    thread.start()
    try:
        if not started.wait(timeout):
            raise RuntimeError(f"switch simulator not listening after {timeout} s")
        if errors:
            raise RuntimeError(f"switch simulator failed to start: {errors[0]}")
        yield
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
