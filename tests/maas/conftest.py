from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

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
    sim = MaasSim(API_KEY, {"commission_seconds": 0.05, "deploy_seconds": 0.05})
    power = Power()
    sim.power_on = power
    server = serve("127.0.2.11", 0, sim)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RunningMaas(f"http://127.0.2.11:{server.server_address[1]}/MAAS/", sim, power)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
