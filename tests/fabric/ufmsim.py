"""The lab's UFM simulator (`python -m sim.ufm.server`) over an ibsim fabric, for the tests that drive UFM or
`fabric ports` through it: on the lab's UFM address (sim/addresses.py) and a port free when it starts, so no
two modules share one; the server is stopped (and the fabric with it) when the block ends. `ufm_site` adds the
embedded site copied, its UFM pointed at the simulator."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from fabric.design import load_design
from fabric.topology import End
from fabric.ufm.client import JOB_TIMEOUT_S, UfmActuator, UfmClient
from provision.site.credentials import Login, Secret
from sim.addresses import UFM_ADDRESS, free_port
from sim.ibfabric import IbFabric
from tests.fabric.conftest import SIM_DESIGN
from tests.sites import copy_sim_site

SITE_UFM_URL = "https://127.0.2.2:8443/"  # the embedded site's UFM (inventory/sim/site.yml)


@dataclass(frozen=True)
class UfmLab:
    """A UFM simulator answering on `url` (no trailing slash) as admin/`password`, over `fabric`, whose tools'
    announcement (`$BRINGUP_IB_DIAGS`) is `state`."""

    fabric: IbFabric
    url: str
    password: str
    state: Path

    def client(self, password: str | None = None, *, timeout_s: float = 30.0,
               job_timeout_s: float = JOB_TIMEOUT_S) -> UfmClient:
        """The project's UFM client, as admin with `password` (default: the simulator's)."""
        return UfmClient(self.url, Login("admin", Secret(password or self.password)), verify=False,
                         timeout_s=timeout_s, job_timeout_s=job_timeout_s)

    def phys(self, *ends: End) -> list[str]:
        """Each port's physical state as the simulator reports it."""
        async def read() -> list[str]:
            async with self.client() as c:
                return [(await UfmActuator(c).status(e)).phys for e in ends]
        return asyncio.run(read())


@dataclass(frozen=True)
class UfmSite(UfmLab):
    site: Path  # a copy of the embedded site whose fabric's UFM is `url`


@contextmanager
def ufm_sim_of(faults: Path, password: str, workdir: Path, poll_s: float, routing_engine: str = "ftree",
               design: Path = SIM_DESIGN) -> Iterator[UfmLab]:
    """ibsim from `design` (its announcement and the simulator's certificates in `workdir`) and the UFM simulator
    with `faults` (its OpenSM asked for `routing_engine`), answering once this yields; both stopped when the
    block ends."""
    address = UFM_ADDRESS
    port = free_port(address)
    state = workdir / "ibfabric.json"
    with IbFabric(load_design(design), state_file=state) as fabric:
        env = {**os.environ, "BRINGUP_SIM_UFM_PASSWORD": password}
        proc = subprocess.Popen([sys.executable, "-m", "sim.ufm.server", "--address", address, "--port", str(port),
                                 "--ibsim-state", str(state), "--cert-dir", str(workdir), "--faults", str(faults),
                                 "--design", str(design), "--poll-s", str(poll_s), "--routing-engine", routing_engine],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"https://{address}:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                assert time.monotonic() < deadline, "the UFM simulator did not start"
                try:
                    httpx.get(f"{url}/", verify=False, timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            yield UfmLab(fabric, url, password, state)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@contextmanager
def ufm_site(tmp: Path, password: str, poll_s: float, *, faults: str | None = None, more_faults: str = "",
             routing_engine: str = "ftree") -> Iterator[UfmSite]:
    """The embedded site copied to `tmp`/sim with its ufm-faults.yml (replaced by `faults` when given, then
    `more_faults` added), and the UFM simulator over its fabric; the copy's UFM is the simulator."""
    site = copy_sim_site(tmp / "sim")
    faults_file = tmp / "sim" / "ufm-faults.yml"
    faults_file.write_text((faults_file.read_text() if faults is None else faults) + more_faults)
    with ufm_sim_of(faults_file, password, tmp, poll_s, routing_engine, tmp / "sim" / "fabric" / "design.yml") as lab:
        text = site.read_text()
        assert text.count(SITE_UFM_URL) == 1, f"{site} no longer names its UFM as {SITE_UFM_URL}"
        site.write_text(text.replace(SITE_UFM_URL, f"{lab.url}/"))
        yield UfmSite(lab.fabric, lab.url, lab.password, lab.state, site)
