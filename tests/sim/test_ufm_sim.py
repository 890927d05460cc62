"""The UFM REST simulator on ibsim, through the project's own UFM client.

Shapes are pinned to NVIDIA's UFM Enterprise REST API Guide and its captures in ../shared/realdata/3_ufm:
- events: "Events REST API", https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6242/ (6.24
  schema: id, name, type, event_type, severity, timestamp, counter, category, object_name, object_path,
  write_to_syslog, description: the keys of ufm-rest-events__...v6242...json);
- links: "Links REST API", https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6200/ (the keys of
  ufm-rest-links__...v6200...NDR-sw-ufm-ndr03.json);
- ports: "Ports REST API" (guid, number, name, dname, node_description, system_name, logical_state,
  physical_state), read by fabric.ufm.resources.parse_ufm_ports;
- disable/enable: "Actions REST API", https://docs.nvidia.com/networking/display/ufmenterpriserestapiv6201/
  Actions+REST+API (POST /ufmRest/actions, 202 with a job Location);
- authentication: "REST API Complementary Information" (Basic on /ufmRest; 401 without it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fabric.topology import End
from fabric.ufm.client import UfmActuator, UfmAuthKind, UfmClient
from fabric.ufm.errors import UfmAuthError
from fabric.ufm.events import parse_rest_events
from fabric.ufm.resources import parse_ufm_ports
from provision.site.credentials import Login, Secret
from sim import lifetime
from sim.addresses import UFM_ADDRESS, free_port
from tests.fabric.ufmsim import UfmLab, ufm_sim_of
from tests.processes import command_line, still_running

pytestmark = pytest.mark.tools("ibsim", "opensm")
LEAF = "0c42a10300000000"
EVENT_KEYS = {"id", "name", "type", "event_type", "severity", "timestamp", "counter", "category", "object_name",
              "object_path", "write_to_syslog", "description"}
LINK_KEYS = {"source_guid", "source_port", "destination_guid", "destination_port", "source_port_dname",
             "source_port_name", "destination_port_dname", "destination_port_name", "width", "severity",
             "source_port_node_description", "destination_port_node_description", "name", "capabilities"}


@pytest.fixture(scope="module")
def ufm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UfmLab]:
    tmp = tmp_path_factory.mktemp("ufm")
    faults = tmp / "ufm-faults.yml"
    faults.write_text("ber:\n  - {node: leaf-A-r3-U40, port: 2, per_min: 6000}\n")
    with ufm_sim_of(faults, "s3cret-ufm", tmp, poll_s=2) as lab:
        yield lab


def test_no_credential_is_401_and_a_wrong_one_is_an_auth_error(ufm: UfmLab) -> None:
    assert httpx.get(f"{ufm.url}/ufmRest/app/events", verify=False).status_code == 401

    async def wrong() -> None:
        async with ufm.client("wrong") as c:
            await c.events()
    with pytest.raises(UfmAuthError) as caught:
        asyncio.run(wrong())
    assert "wrong" not in str(caught.value)


def test_shapes_events_from_a_pulled_cable_and_rising_symbol_errors(ufm: UfmLab) -> None:
    fabric = ufm.fabric
    fabric.unlink("leaf-A-r3-U40", 30)

    async def read() -> tuple[str, str, str]:
        async with ufm.client() as c:
            return await c.events(), await c.links(), await c.ports()
    deadline = time.monotonic() + 40  # the simulator polls the fabric every 2 s (slower on a loaded machine)
    while True:
        events, links, ports = asyncio.run(read())
        seen = {e["event_type"] for e in json.loads(events)}
        if {"329", "110"} <= seen or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    raw = json.loads(events)
    assert raw and all(set(e) == EVENT_KEYS for e in raw)
    assert all(set(link) == LINK_KEYS for link in json.loads(links))
    parsed = parse_rest_events(events, "ufm")
    codes = {e.code for e in parsed.events}
    assert 329 in codes and 110 in codes and not parsed.rejected
    down = next(e for e in parsed.events if e.code == 329)
    assert f"{LEAF}_30" in down.object_path
    ber = next(e for e in parsed.events if e.code == 110)
    assert ber.dev_id == LEAF and f"{LEAF}_2" in ber.object_path
    assert End(LEAF, 1) in parse_ufm_ports(ports).ports
    fabric.relink("leaf-A-r3-U40", 30)


def test_disable_and_enable_really_change_the_link_in_ibsim(ufm: UfmLab) -> None:
    fabric = ufm.fabric
    end = End(LEAF, 5)
    before = fabric.discover().count("\n[")

    async def cycle() -> tuple[str, str]:
        async with ufm.client() as c:
            actuator = UfmActuator(c)
            await actuator.set_enabled(end, False)
            off = (await actuator.status(end)).phys
            gone = fabric.discover().count("\n[")
            assert gone == before - 2
            await actuator.set_enabled(end, True)
            return off, (await actuator.status(end)).phys
    off, on = asyncio.run(cycle())
    assert (off, on) == ("Disabled", "LinkUp")
    assert fabric.discover().count("\n[") == before


def test_a_session_and_an_access_token_read_what_basic_credentials_read(ufm: UfmLab) -> None:
    """NVIDIA's REST API guide ("REST API Complementary Information"): a /dologin session opens /ufmRestV2, a
    token made by `POST /ufmRest/app/tokens` opens /ufmRestV3 (`Authorization: Basic <token>`); sim/ufm/auth.py."""
    password, base = ufm.password, ufm.url
    made = httpx.post(f"{base}/ufmRest/app/tokens", auth=("admin", password), verify=False)
    token = made.json()["access_token"]
    assert made.status_code == 200 and len(token) == 30 and token.isalnum()
    assert httpx.get(f"{base}/ufmRestV3/resources/links", auth=("admin", password), verify=False).status_code == 401

    async def read(kind: UfmAuthKind, secret: str) -> str:
        async with UfmClient(base, Login("admin", Secret(secret)), verify=False, timeout_s=30, auth=kind) as c:
            return await c.links()
    basic = asyncio.run(read("basic", password))
    assert asyncio.run(read("session", password)) == basic and asyncio.run(read("token", token)) == basic


def test_sigterm_ends_the_simulator_and_its_sweep_at_once(ufm: UfmLab, tmp_path: Path) -> None:
    """A second simulator on the module's fabric, sent SIGTERM while its first sweep's opensm runs: it is gone
    within a moment and leaves no tool behind (a killed test run once left one that ignored SIGTERM for 5 s+)."""
    proc = subprocess.Popen([sys.executable, "-m", "sim.ufm.server", "--address", UFM_ADDRESS,
                             "--port", str(free_port(UFM_ADDRESS)), "--ibsim-state", str(ufm.state),
                             "--cert-dir", str(tmp_path)],
                            env={**os.environ, "BRINGUP_SIM_UFM_PASSWORD": ufm.password}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        below = lifetime.descendants(proc.pid)
        while not any(" -o -R ftree " in (command_line(pid) or "") for pid in below):
            assert proc.poll() is None and time.monotonic() < deadline, "no sweep seen"
            time.sleep(0.01)
            below = lifetime.descendants(proc.pid)
        proc.terminate()
        started = time.monotonic()
        assert proc.wait(10) == 0
        took = time.monotonic() - started
        assert took < 2, f"{took:.1f} s after SIGTERM"  # ~0.2 s idle: 3 rounds of killing its tools 50 ms apart
        assert not still_running(below)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
