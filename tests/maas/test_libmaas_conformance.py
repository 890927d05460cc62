"""Conformance: python-libmaas, Canonical's official MAAS client (PyPI python-libmaas 0.6.8, deps/python/maas.txt),
against the MAAS simulator, as a new user would drive a real MAAS.

The client reads `GET /MAAS/api/2.0/describe/` first and builds every call from it (maas/client/bones), sends
the power parameters as one JSON `power_parameters` field (viscera/machines.py `MachinesType.create`), parses
the machine record into typed fields (`NodeStatus`, `PowerState`, related domain, zone, pool and interface
objects) and waits on a commissioning, deployment or release by re-reading the machine. The project's own
client (provision/maas/client.py) walks the same simulator in test_maas_client.py, so both stay honest.
"""

from __future__ import annotations

import asyncio
from typing import Any

from maas.client import connect
from maas.client.bones import SessionAPI
from maas.client.enum import NodeStatus, PowerState

from tests.maas.conftest import API_KEY, RunningMaas

POLL = 0.02  # the simulator's actions take 0.05 s


async def _settled(machine: Any, *moving: NodeStatus) -> Any:
    for _ in range(250):
        if machine.status not in moving:
            return machine
        await asyncio.sleep(POLL)
        await machine.refresh()
    return machine


def test_libmaas_walks_a_machine_through_create_commission_deploy_and_release(maas: RunningMaas) -> None:
    bmc = {"power_address": "127.0.16.9:8443", "power_user": "root", "power_pass": "calvin"}

    async def walk() -> list[tuple[str, Any]]:
        client = await connect(maas.url, apikey=API_KEY)
        seen: list[tuple[str, Any]] = []
        machine = await client.machines.create(
            architecture="amd64/generic", mac_addresses=["b8:ce:f6:00:09:01", "b8:ce:f6:00:09:02"],
            power_type="redfish", power_parameters=bmc, hostname="gpu-lm-1")
        seen.append(("created", machine.status))  # an admin's enlistment commissions at once
        await _settled(machine, NodeStatus.COMMISSIONING)
        await machine.commission(wait=True, wait_interval=POLL)
        seen.append(("commissioned", machine.status))
        [listed] = await client.machines.list(hostnames=["gpu-lm-1"])
        seen.append(("listed", (listed.system_id == machine.system_id, listed.fqdn, listed.zone.name,
                                listed.pool.name, [i.mac_address for i in listed.interfaces])))
        await machine.deploy(distro_series="noble", wait=True, wait_interval=POLL)
        seen.append(("deployed", (machine.status, machine.distro_series, machine.power_state,
                                  len(machine.ip_addresses))))
        await machine.release(wait=True, wait_interval=POLL)
        seen.append(("released", (machine.status, await machine.query_power_state())))
        return seen

    assert asyncio.run(walk()) == [
        ("created", NodeStatus.COMMISSIONING),
        ("commissioned", NodeStatus.READY),
        ("listed", (True, "gpu-lm-1.maas", "default", "default", ["b8:ce:f6:00:09:01", "b8:ce:f6:00:09:02"])),
        ("deployed", (NodeStatus.DEPLOYED, "noble", PowerState.ON, 1)),
        ("released", (NodeStatus.READY, PowerState.OFF)),
    ]
    # The JSON power parameters reached MAAS's Redfish driver: the BMC was powered on for the enlistment's
    # commissioning, the second commissioning and the deployment.
    assert maas.power.calls == [bmc] * 3


def test_libmaas_sees_a_manual_machine_s_power_as_unknown(maas: RunningMaas) -> None:
    """MAAS's manual power driver cannot query a machine (provisioningserver/drivers/power/manual.py:
    queryable = False, power_query answers "unknown") and MAAS records a non-queryable machine as
    POWER_STATE.UNKNOWN (maasserver/models/node.py), through commissioning and deployment alike."""

    async def walk() -> list[PowerState]:
        client = await connect(maas.url, apikey=API_KEY)
        machine = await client.machines.create(architecture="amd64/generic", mac_addresses=["b8:ce:f6:00:09:11"],
                                               power_type="manual", hostname="gpu-lm-2")
        states = [machine.power_state]
        await _settled(machine, NodeStatus.COMMISSIONING)
        await machine.deploy(distro_series="noble", wait=True, wait_interval=POLL)
        return [*states, machine.power_state, await machine.query_power_state()]

    assert asyncio.run(walk()) == [PowerState.UNKNOWN] * 3
    assert maas.power.calls == []


def test_libmaas_without_an_api_key_can_only_enlist_and_the_machine_waits_new(maas: RunningMaas) -> None:
    """An anonymous session binds each resource's anonymous handler from describe/ (bones `SessionAPI`):
    enlistment only (AnonMachinesHandler.create), held New for an admin, answered with the anonymous fields."""

    async def enlist() -> tuple[Any, Any]:
        anonymous = await connect(maas.url)
        machine = await anonymous.machines.create(
            architecture="amd64/generic", mac_addresses=["b8:ce:f6:00:09:21"], power_type="redfish",
            power_parameters={"power_address": "127.0.16.9:8443", "power_user": "root", "power_pass": "pw"})
        session = await SessionAPI.fromURL(maas.url + "api/2.0/")  # what the anonymous client was built from
        return machine, {name: sorted(a for a, _ in handler.actions) for name, handler in session.handlers}

    machine, handlers = asyncio.run(enlist())
    assert (machine.status, machine.power_state, machine.system_id in maas.sim.machines) == (
        NodeStatus.NEW, PowerState.UNKNOWN, True)
    assert handlers == {"Machines": ["create"], "Version": ["read"]}, "an anonymous session reads no machine"
    assert maas.power.calls == []
