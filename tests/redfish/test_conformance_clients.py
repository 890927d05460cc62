"""Official Redfish clients do bringup's two BMC jobs on the simulator, and so does bringup's own client:
harvest the MACs and arm a one-time PXE boot (BootSourceOverrideTarget Pxe, Enabled Once), then boot.

- OpenStack's `sushy` (what Ironic drives BMCs with), with its session auth;
- DMTF's `redfish` (python-redfish-library, the client of DMTF's own tools), with a session login and
  the simulator's CA verified;
- `provision.redfish.RedfishClient`, the async client bringup keeps for 512 BMCs at once.

All three must see the same MACs (the simulator's identity of the host) and leave the same state: the
override consumed by the next boot, which booted from the network, and no session left open.
"""

from __future__ import annotations

import asyncio
import gc
import os
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from provision.bmc.harvest import find_system, harvest
from provision.bmc.power import PowerAction, arm_pxe_once, power
from provision.redfish import ClientOptions, RedfishClient
from provision.site import load_site
from provision.site.credentials import Login, Secret
from provision.site.model import Host, Site
from sim.redfish.identity import identity
from tests.redfish.simlab import SimProcess, free_port, new_password, write_site

SYSTEM = "/redfish/v1/Systems/System.Embedded.1"


class Lab:
    def __init__(self, sim: SimProcess, site: Site, password: str) -> None:
        self.sim, self.site, self.password = sim, site, password

    def host(self, index: int) -> Host:
        return self.site.hosts()[index]

    def url(self, host: Host) -> str:
        return f"https://{host.bmc.address}:{host.bmc.port}"

    def macs(self, host: Host) -> set[str]:
        return {n.mac for n in identity(self.site, host).nics}

    def state(self, host: Host) -> dict[str, Any]:
        state: dict[str, Any] = self.sim.hosts()[host.hostname]
        return state


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    d = tmp_path_factory.mktemp("clients")
    password = new_password()
    site_path = write_site(d, 4, free_port())
    with SimProcess(site_path, password, d / "run", power_delay_ms=100) as sim:
        yield Lab(sim, load_site(site_path), password)


def _booted_from_pxe_once(lab: Lab, host: Host) -> None:
    state = lab.state(host)
    assert state["boots"] == ["Pxe"] and state["power"] == "On"
    assert state["boot"]["BootSourceOverrideEnabled"] == "Disabled"  # Once was used by that boot
    assert state["sessions"] == 0


def test_sushy_harvests_the_macs_and_arms_pxe_once(lab: Lab) -> None:
    sushy = pytest.importorskip("sushy", reason="the sushy client library is not installed")
    host = lab.host(1)
    # sushy deletes its session in Sushy.__del__, with blocking retries when the BMC is gone: left to
    # the garbage collector, that ran during a later test's harvest, after this simulator had
    # stopped, and froze that test's event loop for 27 s. So the session is closed here, while the
    # simulator can still answer, and the simulator must have seen it deleted.
    auth = sushy.auth.SessionOrBasicAuth(username="root", password=lab.password)
    with auth:
        root = sushy.Sushy(f"{lab.url(host)}/redfish/v1", auth=auth, verify=str(lab.sim.ca))
        systems = root.get_system_collection()
        assert systems.members_identities == (SYSTEM,)
        system = root.get_system(systems.members_identities[0])
        assert set(system.ethernet_interfaces.summary) == lab.macs(host)
        system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE,
                                       mode=sushy.BOOT_SOURCE_MODE_UEFI)
        system.refresh()
        assert system.boot.target == sushy.BOOT_SOURCE_TARGET_PXE
        assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE
        system.reset_system(sushy.RESET_ON)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            system.refresh()
            if system.power_state == sushy.POWER_STATE_ON:
                break
            time.sleep(0.05)
        assert system.power_state == sushy.POWER_STATE_ON
        assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_DISABLED
        assert lab.state(host)["sessions"] == 1
    root._auth = None  # closed above; nothing left for __del__
    _booted_from_pxe_once(lab, host)


def test_dmtf_redfish_library_harvests_the_macs_and_arms_pxe_once(lab: Lab) -> None:
    redfish = pytest.importorskip("redfish", reason="DMTF's python-redfish-library is not installed")
    host = lab.host(2)
    client = redfish.redfish_client(base_url=lab.url(host), username="root", password=lab.password,
                                    cafile=str(lab.sim.ca), timeout=10, max_retry=1)
    client.login(auth="session")
    try:
        assert lab.state(host)["sessions"] == 1
        systems = client.get("/redfish/v1/Systems").dict["Members"]
        assert [m["@odata.id"] for m in systems] == [SYSTEM]
        system = client.get(SYSTEM).dict
        nics = client.get(system["EthernetInterfaces"]["@odata.id"]).dict["Members"]
        macs = {client.get(m["@odata.id"]).dict["MACAddress"] for m in nics}
        assert macs == lab.macs(host)
        patched = client.patch(SYSTEM, body={"Boot": {"BootSourceOverrideTarget": "Pxe",
                                                      "BootSourceOverrideEnabled": "Once"}})
        assert patched.status == 200
        boot = client.get(SYSTEM).dict["Boot"]
        assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == ("Pxe", "Once")
        target = system["Actions"]["#ComputerSystem.Reset"]["target"]
        assert client.post(target, body={"ResetType": "On"}).status in (200, 202, 204)
        deadline = time.monotonic() + 10
        while client.get(SYSTEM).dict["PowerState"] != "On" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        client.logout()
    _booted_from_pxe_once(lab, host)


def _ca(lab: Lab) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(lab.sim.ca))


def _client(lab: Lab, host: Host) -> RedfishClient:
    return RedfishClient(lab.url(host), Login("root", Secret(lab.password)),
                         tls=_ca(lab), options=ClientOptions(timeout_s=10))


def test_our_client_harvests_the_same_macs_and_arms_pxe_once(lab: Lab) -> None:
    host = lab.host(0)

    async def go() -> set[str]:
        async with _client(lab, host) as bmc:
            system = await find_system(bmc)
            inv = await harvest(bmc, lab.site.host_class(host), system)
            await arm_pxe_once(bmc, system, "UEFI")
            await power(bmc, system, PowerAction.on, timeout_s=10, poll_s=0.05)
            return {n.mac for n in inv.nics}

    assert asyncio.run(go()) == {m.lower() for m in lab.macs(host)}  # bringup keeps MACs lower-case
    _booted_from_pxe_once(lab, host)


def test_our_client_logs_in_again_when_its_session_is_ended_under_it(lab: Lab) -> None:
    # DSP0266: a session deleted from the Sessions collection is over; its token is refused with 401.
    # A BMC's administrator (or a BMC reset) can do that to a long-running bringup at any time.
    host = lab.host(3)

    async def go() -> tuple[str, str]:
        async with _client(lab, host) as bmc:
            before = (await bmc.get(SYSTEM)).data["Id"]
            with httpx.Client(base_url=lab.url(host), verify=_ca(lab), auth=("root", lab.password)) as admin:
                sessions = admin.get("/redfish/v1/SessionService/Sessions").json()["Members"]
                assert len(sessions) == 1
                assert admin.delete(sessions[0]["@odata.id"]).status_code == 200
            assert lab.state(host)["sessions"] == 0
            after = (await bmc.get(SYSTEM)).data["Id"]
            assert lab.state(host)["sessions"] == 1  # a new session, not Basic auth from now on
            return before, after

    assert asyncio.run(go()) == ("System.Embedded.1", "System.Embedded.1")
    assert lab.state(host)["sessions"] == 0  # the new session was the one deleted at close



def test_our_client_leaves_no_socket_open_when_its_loop_ends(lab: Lab) -> None:
    # Closing a TLS stream waits for the peer's close_notify; a client that closes without waiting left
    # its socket to the garbage collector once asyncio.run returned (ResourceWarning: unclosed transport).
    host = lab.host(0)

    async def go() -> None:
        async with _client(lab, host) as bmc:
            await bmc.get(SYSTEM)

    fds = set(os.listdir("/proc/self/fd"))
    gc.disable()
    try:
        asyncio.run(go())
        left = set(os.listdir("/proc/self/fd")) - fds
    finally:
        gc.enable()
    assert not left, [os.readlink(f"/proc/self/fd/{fd}") for fd in left if os.path.exists(f"/proc/self/fd/{fd}")]
