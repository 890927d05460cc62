from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sim.maas.server import MaasSim, PowerError, serve

API_KEY = "ck1234:tk5678:sekret90"


@dataclass
class Power:
    calls: list[dict[str, str]] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)

    def __call__(self, params: dict[str, str]) -> None:
        self.calls.append(params)
        if params.get("power_address") in self.broken:
            raise PowerError(f"Failed to power on via Redfish at {params['power_address']}: ConnectError")


@dataclass
class RunningMaas:
    url: str
    sim: MaasSim
    power: Power


@pytest.fixture
def maas() -> Iterator[RunningMaas]:
    sim = MaasSim(API_KEY, {"commission_seconds": 0.05, "deploy_seconds": 0.05, "release_seconds": 0.05})
    power = Power()
    sim.power_on = power
    server = serve("127.0.2.11", 0, sim)
    report = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        # A client that gave up on an answer (see LostAnswers) closed its end: not a simulator fault.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            report(request, client_address)

    server.handle_error = handle_error  # type: ignore[method-assign]
    # A short poll: shutdown() waits for the loop's next look, 0.5 s by default, at every test's end.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield RunningMaas(f"http://127.0.2.11:{server.server_address[1]}/MAAS/", sim, power)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class LostAnswers:
    """Wraps one of the simulator's actions so that the HTTP answer of its first `lost` calls is held
    back until `release()` (or 10 s): the client gives up waiting for it, as when MAAS is slow or the
    answer is lost. `act_first` says whether a held call acts before the hold (MAAS did it, the answer
    was lost) or after it (MAAS had not acted yet when the client gave up)."""

    def __init__(self, action: Callable[..., Any], *, lost: int = 1, act_first: bool = True) -> None:
        self.action = action
        self.lost = lost
        self.act_first = act_first
        self.calls = 0
        self._released = threading.Event()

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.calls > self.lost:
            return self.action(*args)
        if not self.act_first:
            self._released.wait(timeout=10)
            return self.action(*args)
        try:
            return self.action(*args)
        finally:
            self._released.wait(timeout=10)

    def release(self) -> None:
        self._released.set()
