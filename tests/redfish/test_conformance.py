"""Our client against a third-party Redfish service: OpenStack's `sushy-emulator --fake` (list systems,
NICs, one-time PXE, reset). The other way round, official clients against our simulator, is
test_conformance_clients.py; DMTF's Service Validator against it is test_conformance_validator.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.bmc.harvest import find_system, harvest
from provision.bmc.power import PowerAction, arm_pxe_once, power
from provision.bmc.triage import HostProblem
from provision.redfish import RedfishClient
from provision.site.credentials import Login, Secret
from provision.site.model import HostClass
from tests.redfish.simlab import free_port

UUID = "8a0e8a4c-2f3b-4d52-9c5e-0c7b2f1d9a11"
NIC_MACS = ["52:54:00:6b:3c:01", "52:54:00:6b:3c:02"]
EMULATOR = shutil.which("sushy-emulator") or str(Path(sys.executable).parent / "sushy-emulator")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(EMULATOR).exists():
        pytest.skip("sushy-emulator is not installed (pip install -r deps/python/redfish.txt)")
    d = tmp_path_factory.mktemp("sushy")
    config = d / "emulator.conf"
    config.write_text(
        f"SUSHY_EMULATOR_STATE_DIR = {str(d / 'state')!r}\n"
        "SUSHY_EMULATOR_FAKE_SYSTEMS = [{"
        f"'uuid': {UUID!r}, 'name': 'fake-node', 'power_state': 'Off', 'external_notifier': False, "
        f"'nics': [{{'mac': {NIC_MACS[0]!r}, 'ip': '172.22.0.10'}}, {{'mac': {NIC_MACS[1]!r}, 'ip': '172.22.0.11'}}]"
        "}]\n")
    port = free_port()
    log = (d / "emulator.log").open("wb")
    proc = subprocess.Popen([EMULATOR, "--config", str(config), "--fake", "-i", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert proc.poll() is None, (d / "emulator.log").read_text()
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        log.close()


def client(url: str) -> RedfishClient:
    return RedfishClient(url, Login("admin", Secret("unused")), tls=False)


def test_our_client_lists_systems_and_nics_of_sushy_emulator(emulator: str) -> None:
    async def go() -> Any:
        async with client(emulator) as bmc:
            system = await find_system(bmc)
            return system, await harvest(bmc, HostClass(), system)

    system, inv = asyncio.run(go())
    assert system.path == f"/redfish/v1/Systems/{UUID}"  # found through the Systems collection, no iDRAC path
    assert sorted(n.mac for n in inv.nics) == NIC_MACS
    assert inv.system.manufacturer == "Sushy Emulator" and inv.system.service_tag is None
    # No link status and no FQDDs: the first NIC is the PXE NIC, and unknown link is not "down".
    assert inv.pxe.problem is None and inv.pxe.nic is not None and inv.pxe.nic.mac == NIC_MACS[0]
    assert all(n.link is None for n in inv.nics)
    assert inv.cross_check == {"checked": False}  # the emulator's chassis has no NetworkAdapters


def test_our_one_time_pxe_notices_that_sushy_emulator_keeps_it_continuous(emulator: str) -> None:
    # sushy-emulator documents that it ignores BootSourceOverrideEnabled and always sets a continuous
    # boot device; the PATCH is accepted, and the read-back check is what must catch it.
    async def go() -> None:
        async with client(emulator) as bmc:
            system = await find_system(bmc)
            await arm_pxe_once(bmc, system, "UEFI")

    with pytest.raises(HostProblem) as info:
        asyncio.run(go())
    assert info.value.reason == "pxe_not_armed"
    assert info.value.evidence["seen"]["BootSourceOverrideTarget"] == "Pxe"
    assert info.value.evidence["seen"]["BootSourceOverrideEnabled"] == "Continuous"


def test_our_reset_powers_on_sushy_emulator(emulator: str) -> None:
    async def go() -> dict[str, Any]:
        async with client(emulator) as bmc:
            system = await find_system(bmc)
            # the fake driver applies a power change 1-11 s after the request
            return await power(bmc, system, PowerAction.on, timeout_s=20, poll_s=0.5)

    done = asyncio.run(go())
    assert done["resets"] == ["On"] and done["power_state"] == "On"

