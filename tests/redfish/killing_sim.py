"""The Redfish simulator in this process (an event loop in a thread of its own), and a test wrapper around
one simulated BMC's request handler that SIGKILLs the CLI process talking to it at a chosen request: when
the request arrives (the BMC has done nothing) or once the BMC has acted on it (its answer never leaves).
The simulator's code is not changed: the wrapper stands in front of one BMC, as a fault would.

`CliProcesses` starts each CLI run as a process of its own (the CLI's `main`, forked from a forkserver that
imported it once): a real process to kill, without paying the CLI's imports once per kill point."""

from __future__ import annotations

import asyncio
import functools
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.site import load_site
from provision.state import StateStore
from provision.state.opening import SiteIdentity
from sim.redfish import tree
from sim.redfish.bmc import Settings, SimBmc
from sim.redfish.http import HANG, Hang, Request, Response
from sim.redfish.server import Simulator


@dataclass(frozen=True)
class KillPoint:
    """Where a run is killed: at a reset (`method` POST, `reset` its ResetType), the boot override PATCH, or
    the read of the system (GET) that shows `power` after the BMC's last reset was `reset`; with `path`, any
    request of `method` whose path ends so (SimpleUpdate, Bios/Settings), after a reset when `reset` is given.
    `acted`: once the BMC has acted on the request (else on its arrival)."""

    name: str
    method: str
    acted: bool
    reset: str | None = None
    power: str | None = None
    path: str | None = None

    def matches(self, req: Request, bmc: SimBmc) -> bool:
        path = req.path.rstrip("/")
        if req.method != self.method:
            return False
        if self.path is not None:
            after = self.reset is None or (bool(bmc.resets) and bmc.resets[-1] == self.reset
                                           and bmc.power == self.power)
            return path.endswith(self.path) and after
        if self.method == "PATCH":
            return path == tree.SYSTEM
        if self.method == "POST":
            body = req.json() if path.endswith("ComputerSystem.Reset") else None
            return isinstance(body, dict) and body.get("ResetType") == self.reset
        return path == tree.SYSTEM and bool(bmc.resets) and bmc.resets[-1] == self.reset and bmc.power == self.power


class InProcessSim:
    def __init__(self, site: Path, cert_dir: Path, *, power_delay_s: float = 0.1) -> None:
        self.simulator = Simulator(load_site(site), Settings(power_delay_s=power_delay_s), {}, cert_dir, None)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.simulator.start())
        self.killed: dict[str, int] = {}

    def call(self, coro: Awaitable[Any]) -> Any:
        async def wrapped() -> Any:
            return await coro
        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout=30)

    def bmc(self, host: str) -> SimBmc:
        return self.simulator.bmcs[host]

    def set_power(self, host: str, power: str) -> None:
        def change() -> None:
            self.bmc(host).power = power
        self.loop.call_soon_threadsafe(change)

    def settled(self, host: str, timeout_s: float = 10.0) -> str:
        """The BMC's PowerState once no power change is under way."""
        deadline = time.monotonic() + timeout_s
        while self.bmc(host).power.startswith("Powering") and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.bmc(host).power

    def arm(self, host: str, point: KillPoint, pid: Callable[[], int | None]) -> None:
        """Kill the process `pid()` names (once) when `point` comes to this host's BMC."""
        bmc = self.bmc(host)
        original = SimBmc.handle.__get__(bmc)
        fired = threading.Event()

        async def kill() -> Hang:
            deadline = time.monotonic() + 10
            while pid() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            found = pid()
            assert found is not None, "no process to kill"
            os.kill(found, signal.SIGKILL)
            self.killed[host] = found
            return HANG

        async def handle(req: Request) -> Response | Hang:
            hit = not fired.is_set() and point.matches(req, bmc)
            if hit:
                fired.set()
                if not point.acted:
                    return await kill()
            answer = await original(req)
            return await kill() if hit else answer

        bmc.handle = handle  # type: ignore[method-assign]

    def disarm(self, host: str) -> None:
        vars(self.bmc(host)).pop("handle", None)

    def stop(self) -> None:
        self.call(self.simulator.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def _cli(argv: Sequence[str], env: dict[str, str], cli: str = "provision.cli") -> None:
    os.environ.clear()
    os.environ.update(env)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    main: Callable[[list[str]], int] = importlib.import_module(cli).main
    sys.exit(main(list(argv)))


class CliProcesses:
    """CLI runs as processes forked from one server that has imported the CLI (`multiprocessing`'s forkserver)."""

    def __init__(self, preload: Sequence[str] = (), cli: str = "provision.cli") -> None:
        """`cli`: the module whose `main(argv)` each run calls (`fabric.cli` for `python -m fabric.cli`)."""
        self.cli = cli
        self.context = multiprocessing.get_context("forkserver")
        base = ["provision.cli", "provision.bmc", "provision.maas.step"] if cli == "provision.cli" else [cli]
        self.context.set_forkserver_preload([*base, __name__, *preload])

    def start(self, argv: Sequence[str], env: dict[str, str]) -> multiprocessing.process.BaseProcess:
        process = self.context.Process(target=_cli, args=(list(argv), env, self.cli), daemon=True)
        process.start()
        return process

    def close(self) -> None:
        """Stop the forkserver: no process outlives the tests that started it."""
        import multiprocessing.forkserver as forkserver

        stop: Callable[[], None] = getattr(forkserver._forkserver, "_stop")  # noqa: B009 (private: CPython's
        stop()  # own tests stop it so, there is no public call)


def killed_runs(sim: InProcessSim, cli: CliProcesses, argv: Sequence[str], env: dict[str, str],
                points: Mapping[str, KillPoint]) -> None:
    """One CLI process per host (`argv --hosts <host>`), all at once, each killed by its host's BMC at its point."""
    boxes: dict[str, dict[str, int]] = {host: {} for host in points}
    for host, point in points.items():
        sim.arm(host, point, functools.partial(boxes[host].get, "pid"))
    runs = {}
    try:
        for host in points:
            runs[host] = cli.start([*argv, "--hosts", host], env)
            boxes[host]["pid"] = runs[host].pid or 0
        for host, run in runs.items():
            run.join(timeout=90)
            assert run.exitcode == -signal.SIGKILL, f"{host} ({points[host].name}): exit {run.exitcode}"
    finally:
        for host, run in runs.items():
            if run.is_alive():
                run.kill()
                run.join(timeout=10)
            sim.disarm(host)


@dataclass
class KillLab:
    """A site, its store, the in-process simulator and the CLI processes the kill-point tests run against it;
    `cli_args` are what every CLI run of the module adds (e.g. a fast `--poll`)."""

    site: Path
    db: Path
    sim: InProcessSim
    env: dict[str, str]
    cli: CliProcesses
    cli_args: tuple[str, ...] = ()

    def store(self) -> StateStore:
        """The site's store, every host of the site declared in it."""
        loaded = load_site(self.site)
        store = StateStore(self.db, site=SiteIdentity.of(loaded.name, loaded.path))
        store.sync_site((h.hostname, h.rack) for h in loaded.hosts())
        return store

    def killed_runs(self, argv: list[str], points: dict[str, KillPoint]) -> None:
        """One CLI process per host, all at once, each killed by its host's BMC at its point."""
        killed_runs(self.sim, self.cli, [*argv, "--site", str(self.site), "--db", str(self.db), *self.cli_args,
                                         "--json"], self.env, points)
