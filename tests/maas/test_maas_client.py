"""The MAAS client against the MAAS API simulator: OAuth, multipart forms, op= actions, statuses."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from provision.maas.client import MaasClient, multipart
from provision.maas.errors import (
    MaasAuthError,
    MaasConflict,
    MaasNoAnswer,
    MaasNotFound,
    MaasUnreachable,
    MaasValidationError,
)
from provision.maas.machine import MaasStatus, parse_machine
from provision.site.credentials import Secret
from tests.maas.conftest import API_KEY, LostAnswers, RunningMaas

REALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / "6_maas"


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def _until(client: MaasClient, system_id: str, status: MaasStatus) -> MaasStatus:
    for _ in range(200):
        machine = await client.machine(system_id)
        if machine.status is status:
            return machine.status
        await asyncio.sleep(0.02)
    return machine.status


def test_enlist_commission_allocate_deploy(maas: RunningMaas) -> None:
    async def flow() -> None:
        async with MaasClient(maas.url, Secret(API_KEY)) as client:
            assert await client.version() == "3.5.0"
            created = await client.create_machine(
                hostname="gpu-1", macs=["B8:CE:F6:00:00:01", "b8:ce:f6:00:00:02"], architecture="amd64/generic",
                power_type="redfish", power_parameters={"power_address": "127.0.16.1:8443", "power_user": "root",
                                                        "power_pass": "pw"})
            assert created.status is MaasStatus.COMMISSIONING and created.boot_mac == "b8:ce:f6:00:00:01"
            assert await _until(client, created.system_id, MaasStatus.READY) is MaasStatus.READY
            allocated = await client.allocate(created.system_id)
            assert allocated.status is MaasStatus.ALLOCATED
            deploying = await client.deploy(created.system_id, distro_series="noble")
            assert deploying.status is MaasStatus.DEPLOYING and deploying.distro_series == "noble"
            assert await _until(client, created.system_id, MaasStatus.DEPLOYED) is MaasStatus.DEPLOYED
            [listed] = await client.machines(hostnames=["gpu-1"])
            assert listed.macs == ("b8:ce:f6:00:00:01", "b8:ce:f6:00:00:02")

    _run(flow())
    # MAAS powered the machine through its BMC twice: commissioning and deployment
    assert [c["power_address"] for c in maas.power.calls] == ["127.0.16.1:8443"] * 2
    assert maas.power.calls[0]["power_pass"] == "pw"


def test_wrong_api_key_is_an_auth_error(maas: RunningMaas) -> None:
    async def flow() -> None:
        async with MaasClient(maas.url, Secret("ck1234:tk5678:wrong")) as client:
            await client.machines()

    with pytest.raises(MaasAuthError, match="401"):
        _run(flow())


def test_form_errors_carry_maas_fields(maas: RunningMaas) -> None:
    async def flow() -> None:
        async with MaasClient(maas.url, Secret(API_KEY)) as client:
            await client.create_machine(hostname="a", macs=["aa:bb:cc:dd:ee:01"], architecture="amd64/generic",
                                        power_type="manual", power_parameters={})
            await client.create_machine(hostname="b", macs=["aa:bb:cc:dd:ee:01"], architecture="amd64/generic",
                                        power_type="manual", power_parameters={})

    with pytest.raises(MaasValidationError) as info:
        _run(flow())
    assert "aa:bb:cc:dd:ee:01 is already in use on a" in info.value.fields["mac_addresses"][0]


def test_actions_in_the_wrong_status_are_conflicts(maas: RunningMaas) -> None:
    async def flow() -> None:
        async with MaasClient(maas.url, Secret(API_KEY)) as client:
            m = await client.create_machine(hostname="c", macs=["aa:bb:cc:dd:ee:02"], architecture="amd64/generic",
                                            power_type="manual", power_parameters={}, commission=False)
            assert m.status is MaasStatus.NEW
            await client.deploy(m.system_id, distro_series="jammy")

    with pytest.raises(MaasConflict, match="Cannot deploy node because node is in the NEW state"):
        _run(flow())


def test_unknown_machine_and_unreachable_maas() -> None:
    async def flow(url: str) -> None:
        async with MaasClient(url, Secret(API_KEY), retries=1, timeout_s=1) as client:
            await client.machine("nope")

    with pytest.raises(MaasUnreachable):
        _run(flow("http://127.0.2.99:9/MAAS/"))


def test_a_post_that_could_not_connect_is_unreachable_not_an_unknown_outcome() -> None:
    async def flow() -> None:
        async with MaasClient("http://127.0.2.99:9/MAAS/", Secret(API_KEY), retries=1, timeout_s=1) as client:
            await client.allocate("abc123")

    with pytest.raises(MaasUnreachable) as info:
        _run(flow())
    assert not isinstance(info.value, MaasNoAnswer)


def _enlist(client: MaasClient, hostname: str, mac: str):  # type: ignore[no-untyped-def]
    return client.create_machine(hostname=hostname, macs=[mac.upper()], architecture="amd64/generic",
                                 power_type="manual", power_parameters={})


def test_an_enlistment_whose_answer_is_lost_is_read_back_not_sent_again(
        maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> None:
    lost = LostAnswers(maas.sim.create)  # MAAS enlists the machine; its answer never arrives in time
    monkeypatch.setattr(maas.sim, "create", lost)

    async def flow():  # type: ignore[no-untyped-def]
        async with MaasClient(maas.url, Secret(API_KEY), timeout_s=0.3) as client:
            try:
                return await _enlist(client, "gpu-9", "aa:bb:cc:dd:ee:09")
            finally:
                lost.release()

    machine = _run(flow())
    assert machine.hostname == "gpu-9" and machine.macs == ("aa:bb:cc:dd:ee:09",)
    assert lost.calls == 1, "the create was sent again after MAAS may have acted on it"
    assert [m.hostname for m in maas.sim.machines.values()] == ["gpu-9"]


def test_a_lost_enlistment_maas_does_not_show_fails_without_sending_it_again(
        maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> None:
    lost = LostAnswers(maas.sim.create, act_first=False)  # MAAS has not acted yet when the client gives up
    monkeypatch.setattr(maas.sim, "create", lost)

    async def flow() -> None:
        async with MaasClient(maas.url, Secret(API_KEY), timeout_s=0.3) as client:
            try:
                await _enlist(client, "gpu-8", "aa:bb:cc:dd:ee:08")
            finally:
                lost.release()

    with pytest.raises(MaasNoAnswer, match="did not answer in time"):
        _run(flow())
    assert lost.calls == 1


def test_an_action_whose_answer_is_lost_is_not_sent_again(maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> None:
    lost = LostAnswers(maas.sim.deploy)  # MAAS starts the deployment; its answer never arrives in time
    monkeypatch.setattr(maas.sim, "deploy", lost)

    async def flow() -> str:
        async with MaasClient(maas.url, Secret(API_KEY), timeout_s=0.3) as client:
            m = await client.create_machine(hostname="d", macs=["aa:bb:cc:dd:ee:03"], architecture="amd64/generic",
                                            power_type="manual", power_parameters={})
            assert await _until(client, m.system_id, MaasStatus.READY) is MaasStatus.READY
            try:
                with pytest.raises(MaasNoAnswer):
                    await client.deploy(m.system_id, distro_series="jammy")
            finally:
                lost.release()
            return m.system_id

    system_id = _run(flow())
    assert lost.calls == 1, "the deploy was sent again after MAAS may have acted on it"
    assert maas.sim.machines[system_id].distro_series == "jammy"


def test_a_read_whose_answer_is_lost_is_asked_again(maas: RunningMaas, monkeypatch: pytest.MonkeyPatch) -> None:
    async def flow() -> str:
        async with MaasClient(maas.url, Secret(API_KEY), timeout_s=0.3) as client:
            m = await _enlist(client, "e", "aa:bb:cc:dd:ee:04")
            lost = LostAnswers(maas.sim.get)
            monkeypatch.setattr(maas.sim, "get", lost)
            try:
                return (await client.machine(m.system_id)).hostname
            finally:
                lost.release()
                assert lost.calls == 2

    assert _run(flow()) == "e"


def test_not_found_is_typed(maas: RunningMaas) -> None:
    async def flow() -> None:
        async with MaasClient(maas.url, Secret(API_KEY)) as client:
            await client.machine("nope")

    with pytest.raises(MaasNotFound):
        _run(flow())


def test_multipart_repeats_fields() -> None:
    body, ctype = multipart({"mac_addresses": ["a", "b"], "hostname": "h"})
    boundary = ctype.split("boundary=")[1]
    assert body.count(b'name="mac_addresses"') == 2 and body.endswith(f"--{boundary}--\r\n".encode())


@pytest.mark.realdata
def test_real_maas_machine_records_parse() -> None:
    if not REALDATA.is_dir():
        pytest.skip(f"{REALDATA} is absent: the real MAAS captures live in the shared folder beside the repo")
    listing = json.loads((REALDATA / "maas-api-2.0-machines-read__juju-gomaasapi__machine_test_machinesResponse.json").read_text())
    machines = [parse_machine(m) for m in listing]
    assert [m.status_name for m in machines] == ["Deployed", "Ready", "Ready"]
    assert machines[0].hostname == "untasted-markita" and machines[0].boot_mac is not None
    deployed = parse_machine(json.loads(
        (REALDATA / "maas-api-2.0__ystia-yorc-MAAS_INTEGRATION__prov_maas_all_test_data_machineDeployed.json").read_text()))
    assert deployed.status is MaasStatus.DEPLOYED and deployed.distro_series == "focal" and deployed.power_state == "on"
    # its two NICs carry one MAC in the capture: the machine's MACs are each listed once
    assert deployed.system_id == "tdgqkw" and deployed.macs == ("cb:d5:c9:f7:78:04",)
