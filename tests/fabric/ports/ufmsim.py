"""The lab's UFM simulator (`python -m sim.ufm.server`) on one loopback address, over an ibsim fabric, for the
tests that drive `fabric ports` through it; the server is stopped (and the fabric with it) when the block ends."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from fabric.design import load_design
from fabric.topology import End
from fabric.ufm.client import UfmActuator, UfmClient
from provision.site.credentials import Login, Secret
from sim.ibfabric import IbFabric


@contextmanager
def ufm_sim(sim_dir: Path, address: str, port: int, password: str, state: Path, cert_dir: Path,
            poll_s: float, routing_engine: str = "ftree") -> Iterator[IbFabric]:
    """ibsim from `sim_dir`'s design (its state file at `state`) and the UFM simulator with `sim_dir`'s
    ufm-faults.yml (its OpenSM asked for `routing_engine`), answering on https://address:port once this yields."""
    with ufm_sim_of(sim_dir / "fabric" / "design.yml", sim_dir / "ufm-faults.yml", address, port, password, state,
                    cert_dir, poll_s, routing_engine) as fabric:
        yield fabric


@contextmanager
def ufm_sim_of(design: Path, faults: Path, address: str, port: int, password: str, state: Path, cert_dir: Path,
               poll_s: float, routing_engine: str = "ftree") -> Iterator[IbFabric]:
    """ibsim from `design` (its state file at `state`) and the UFM simulator with `faults`, answering on
    https://address:port once this yields; both stopped when the block ends."""
    with IbFabric(load_design(design), state_file=state) as fabric:
        env = {**os.environ, "BRINGUP_SIM_UFM_PASSWORD": password}
        proc = subprocess.Popen([sys.executable, "-m", "sim.ufm.server", "--address", address, "--port", str(port),
                                 "--ibsim-state", str(state), "--cert-dir", str(cert_dir), "--faults", str(faults),
                                 "--design", str(design), "--poll-s", str(poll_s), "--routing-engine", routing_engine],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                assert time.monotonic() < deadline, "the UFM simulator did not start"
                try:
                    httpx.get(f"https://{address}:{port}/", verify=False, timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            yield fabric
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def phys(url: str, password: str, *ends: End) -> list[str]:
    """Each port's physical state as the UFM at `url` reports it."""
    async def read() -> list[str]:
        async with UfmClient(url, Login("admin", Secret(password)), verify=False) as c:
            return [(await UfmActuator(c).status(e)).phys for e in ends]
    return asyncio.run(read())
