"""The MAAS simulator answers as MAAS 3.5 does where a client can tell: the API description, both forms of
power parameters, the full machine record, anonymous enlistment and a manual machine's power state. Each test
names its source in MAAS's code (canonical/maas, tag 3.5.13) or a real capture."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.maas.conftest import API_KEY, RunningMaas

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "maas"
CK, TK, SECRET = API_KEY.split(":")
OAUTH = (f'OAuth oauth_version="1.0", oauth_signature_method="PLAINTEXT", oauth_consumer_key="{CK}", '
         f'oauth_token="{TK}", oauth_signature="&{SECRET}", oauth_nonce="n1", oauth_timestamp="1"')
REDFISH = {"power_address": "127.0.16.7:8443", "power_user": "root", "power_pass": "calvin"}
# DISPLAYED_MACHINE_FIELDS (maasserver/api/machines.py, 3.5.13) without constraints_by_type (set only on an
# allocation's answer), and the resource_uri every handler adds.
MAAS_35_MACHINE_FIELDS = {
    "system_id", "hostname", "description", "hardware_uuid", "domain", "fqdn", "owner", "owner_data", "locked",
    "cache_sets", "bcaches", "bios_boot_method", "boot_interface", "architecture", "min_hwe_kernel",
    "hwe_kernel", "cpu_count", "cpu_speed", "memory", "swap_size", "storage", "status", "osystem",
    "distro_series", "ephemeral_deploy", "error_description", "netboot", "power_type", "power_state",
    "tag_names", "address_ttl", "ip_addresses", "interface_set", "zone", "pool", "disable_ipv4", "boot_disk",
    "blockdevice_set", "physicalblockdevice_set", "virtualblockdevice_set", "volume_groups", "raids",
    "status_action", "status_message", "status_name", "node_type", "node_type_name", "special_filesystems",
    "parent", "pod", "default_gateways", "current_commissioning_result_id", "current_testing_result_id",
    "current_installation_result_id", "commissioning_status", "commissioning_status_name", "testing_status",
    "testing_status_name", "cpu_test_status", "cpu_test_status_name", "memory_test_status",
    "memory_test_status_name", "network_test_status", "network_test_status_name", "storage_test_status",
    "storage_test_status_name", "other_test_status", "other_test_status_name", "hardware_info",
    "interface_test_status", "interface_test_status_name", "numanode_set", "virtualmachine_id",
    "workload_annotations", "last_sync", "sync_interval", "next_sync", "enable_hw_sync", "resource_uri",
}


_clients: dict[str, httpx.Client] = {}


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.popitem()[1].close()


def _api(maas: RunningMaas, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": OAUTH} if auth else {}
    headers.update(kwargs.pop("headers", {}))
    http = _clients.get(maas.url)
    if http is None:  # one client per simulator: making one (its TLS context) costs more than a request
        http = _clients[maas.url] = httpx.Client(base_url=maas.url.rstrip("/") + "/api/2.0/", timeout=5)
    return http.request(method, path, headers=headers, **kwargs)


def _enlist(maas: RunningMaas, form: dict[str, Any], *, auth: bool = True) -> httpx.Response:
    base = {"architecture": "amd64/generic", "mac_addresses": "b8:ce:f6:00:07:01", "hostname": "gpu-s-1"}
    return _api(maas, "POST", "machines/", auth=auth, data={**base, **form})


def _until(maas: RunningMaas, system_id: str, status: str) -> dict[str, Any]:
    for _ in range(200):
        record: dict[str, Any] = _api(maas, "GET", f"machines/{system_id}/").json()
        if record["status_name"] == status:
            break
        time.sleep(0.02)
    return record


# describe/ ----------------------------------------------------------------------------------------------------


def test_describe_is_served_without_credentials_in_maas_s_shape_with_absolute_uris(maas: RunningMaas) -> None:
    """maasserver/api/doc.py `_describe_api` and doc_handler.py `describe` (URIs made absolute from the
    request); the shape of a real document: canonical/python-libmaas maas/client/bones/testing/api22.raw.json."""
    answer = _api(maas, "GET", "describe/", auth=False)
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/json"
    doc = answer.json()
    assert set(doc) == {"doc", "hash", "resources", "handlers"} and len(doc["hash"]) == 40
    names = [r["name"] for r in doc["resources"]]
    assert names == sorted(names) and {"MachineHandler", "MachinesHandler", "VersionHandler"} <= set(names)
    machines = next(r for r in doc["resources"] if r["name"] == "MachinesHandler")
    assert machines["anon"]["name"] == "AnonMachinesHandler" and machines["auth"]["name"] == "MachinesHandler"
    machine = next(r for r in doc["resources"] if r["name"] == "MachineHandler")["auth"]
    host = maas.url.split("/MAAS/")[0]
    assert set(machine) == {"name", "doc", "params", "path", "uri", "actions"}
    assert machine["params"] == ["system_id"] and machine["path"] == "/MAAS/api/2.0/machines/{system_id}/"
    assert machine["uri"] == host + "/MAAS/api/2.0/machines/{system_id}/"
    deploy = next(a for a in machine["actions"] if a["name"] == "deploy")
    assert deploy == {"name": "deploy", "method": "POST", "op": "deploy", "restful": False, "doc": deploy["doc"]}
    assert doc["handlers"] == [r["anon"] for r in doc["resources"] if r["anon"]] + [
        r["auth"] for r in doc["resources"] if r["auth"]]
    # asked by another name: the URIs follow it, the hash (of the relative description) does not
    other = _api(maas, "GET", "describe/", auth=False, headers={"Host": "maas.example:5240"}).json()
    assert other["handlers"][0]["uri"].startswith("http://maas.example:5240/MAAS/api/2.0/")
    assert other["hash"] == doc["hash"]


def test_every_action_the_description_lists_is_served(maas: RunningMaas) -> None:
    """The simulator routes requests through the table it describes: none answers 'Unrecognised signature'
    or 404 for want of a route (a machine that does not exist is MAAS's own 404 text)."""
    doc = _api(maas, "GET", "describe/", auth=False).json()
    for handler in doc["handlers"]:
        for action in handler["actions"]:
            path = handler["path"].removeprefix("/MAAS/api/2.0/").format(system_id="nosuch")
            params = {"op": action["op"]} if action["op"] else {}
            answer = _api(maas, action["method"], path, auth=not handler["name"].startswith("Anon"), params=params)
            assert "Unrecognised signature" not in answer.text and answer.text != "Not Found", (handler, action)


# power parameters ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [
    {f"power_parameters_{k}": v for k, v in REDFISH.items()},  # the API documentation's form (MAAS's CLI)
    {"power_parameters": json.dumps(REDFISH)},  # python-libmaas, the Terraform provider
], ids=["separate-fields", "one-json-field"])
def test_power_parameters_are_taken_as_separate_fields_or_one_json_object(
        maas: RunningMaas, form: dict[str, str]) -> None:
    """maasserver/forms WithPowerTypeMixin._get_power_parameters parses the JSON; MAAS's own
    test_enlistment.py test_POST_create_creates_machine_with_power_parameters enlists with it."""
    answer = _enlist(maas, {"power_type": "redfish", "commission": "false", **form})
    assert answer.status_code == 200, answer.text
    assert maas.sim.machines[answer.json()["system_id"]].power_parameters == REDFISH


def test_a_separate_power_field_wins_over_the_json_and_unknown_json_keys_are_dropped(maas: RunningMaas) -> None:
    """config_forms.DictCharField.clean_sub_fields: the JSON only gives each setting's initial value."""
    form = {"power_type": "redfish", "commission": "false", "power_parameters_power_pass": "new",
            "power_parameters": json.dumps({**REDFISH, "power_pass": "old", "colour": "blue"})}
    answer = _enlist(maas, form)
    assert maas.sim.machines[answer.json()["system_id"]].power_parameters == {**REDFISH, "power_pass": "new"}


@pytest.mark.parametrize(("form", "status", "body"), [
    ({"power_parameters": "{not json"}, 400, "Failed to parse JSON power_parameters"),
    ({"power_parameters_colour": "blue", **{f"power_parameters_{k}": v for k, v in REDFISH.items()}}, 400,
     {"power_parameters": ["Unknown parameter(s): colour."]}),
    ({}, 400, {"power_parameters": ["This field is required."]}),
    ({"power_parameters": json.dumps({"power_address": "10.0.0.1"})}, 400,
     {"power_parameters": ["Redfish user: This field is required.", "Redfish password: This field is required."]}),
], ids=["bad-json", "unknown-setting", "none", "missing-required"])
def test_power_parameters_maas_refuses(maas: RunningMaas, form: dict[str, str], status: int, body: Any) -> None:
    """WithPowerTypeMixin (bad JSON: a ValidationError without fields, plain text through MAAS's
    middleware) and DictCharField.clean_unknown_params / clean_global_empty / clean_sub_fields, with the
    Redfish driver's required settings and labels (provisioningserver/drivers/power/redfish.py)."""
    answer = _enlist(maas, {"power_type": "redfish", **form})
    assert answer.status_code == status
    assert (answer.text if isinstance(body, str) else answer.json()) == body
    assert not maas.sim.machines


# the machine record --------------------------------------------------------------------------------------------


def test_a_machine_record_has_maas_3_5_s_fields_shaped_as_a_real_capture(maas: RunningMaas) -> None:
    """Fields: DISPLAYED_MACHINE_FIELDS, maasserver/api/machines.py (3.5.13). Shapes: a real MAAS answer for
    a deployed machine (tests/fixtures/maas/machine-deployed.ystia-yorc.json, Apache-2.0): every field both
    have holds the same JSON type (null allowed either side: MAAS leaves many empty until commissioning)."""
    created = _enlist(maas, {"power_type": "manual", "mac_addresses": ["b8:ce:f6:00:07:01", "b8:ce:f6:00:07:02"]})
    system_id = created.json()["system_id"]
    _until(maas, system_id, "Ready")
    _api(maas, "POST", f"machines/{system_id}/", params={"op": "deploy"}, data={"distro_series": "noble"})
    record = _until(maas, system_id, "Deployed")
    assert set(record) == MAAS_35_MACHINE_FIELDS and set(created.json()) == MAAS_35_MACHINE_FIELDS
    real = json.loads((FIXTURES / "machine-deployed.ystia-yorc.json").read_text())
    for name in set(real) & set(record):
        if real[name] is not None and record[name] is not None:
            assert type(record[name]) is type(real[name]), name
    for nested in ("domain", "zone", "pool", "default_gateways"):
        assert set(real[nested]) <= set(record[nested]) | {"description"}, nested
    interface, real_interface = record["interface_set"][0], real["interface_set"][0]
    assert set(real_interface) == set(interface)
    assert set(real_interface["links"][0]) == set(interface["links"][0])
    assert record["boot_interface"] == interface and record["ip_addresses"] == [interface["links"][0]["ip_address"]]
    assert (record["status"], record["status_name"], record["netboot"]) == (6, "Deployed", False)
    assert (record["commissioning_status"], record["commissioning_status_name"]) == (2, "Passed")


# anonymous enlistment ------------------------------------------------------------------------------------------


def test_an_anonymous_enlistment_is_held_new_and_shown_only_the_anonymous_fields(maas: RunningMaas) -> None:
    """AnonMachinesHandler.create (maasserver/api/machines.py): no credentials needed, `commission`
    defaults to false, the machine stays New "for approval by a MAAS admin"; the answer carries only
    DISPLAYED_ANON_MACHINE_FIELDS and AnonMachineHandler's resource_uri."""
    answer = _enlist(maas, {"power_type": "redfish", "power_parameters": json.dumps(REDFISH)}, auth=False)
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == {"system_id", "hostname", "domain", "fqdn", "architecture", "status",
                                  "power_type", "power_state", "zone", "status_action", "status_message",
                                  "status_name", "node_type", "resource_uri"}
    assert (answer.json()["status_name"], answer.json()["power_state"]) == ("New", "unknown")
    machine = maas.sim.machines[answer.json()["system_id"]]
    assert machine.power_parameters == REDFISH and machine.owner is None and maas.power.calls == []


def test_an_anonymous_enlistment_that_commissions_ends_new_for_an_admin_to_accept(maas: RunningMaas) -> None:
    """AnonMachinesHandler.create with commission=true: commissioning runs, and the `enlisting` metadata
    it records makes the machine New, not Ready, when commissioning finishes."""
    answer = _enlist(maas, {"power_type": "manual", "commission": "true"}, auth=False)
    assert answer.json()["status_name"] == "Commissioning"
    system_id = answer.json()["system_id"]
    record = _until(maas, system_id, "New")
    assert (record["status_name"], record["commissioning_status_name"]) == ("New", "Passed")


def test_without_credentials_only_enlistment_is_open(maas: RunningMaas) -> None:
    """Anonymous callers reach AnonMachinesHandler, which has no read (400 "Unrecognised signature");
    MachineHandler has no anonymous actions (401); wrong credentials never fall back to anonymous."""
    _enlist(maas, {"power_type": "manual", "commission": "false"})
    system_id = next(iter(maas.sim.machines))
    listing = _api(maas, "GET", "machines/", auth=False)
    assert (listing.status_code, listing.text) == (400, "Unrecognised signature: method=GET op=None")
    assert _api(maas, "GET", f"machines/{system_id}/", auth=False).status_code == 401
    wrong = _api(maas, "POST", "machines/", auth=False, headers={"Authorization": OAUTH.replace(SECRET, "wrong")},
                 data={"architecture": "amd64/generic", "mac_addresses": "b8:ce:f6:00:07:09"})
    assert (wrong.status_code, wrong.text) == (401, "Authorization Error: Invalid signature")
    assert len(maas.sim.machines) == 1


# a manual machine's power ----------------------------------------------------------------------------------------


def test_a_manual_machine_s_power_state_stays_unknown_through_commissioning_and_release(maas: RunningMaas) -> None:
    """drivers/power/manual.py (queryable = False; power_query answers "unknown"); models/node.py
    get_effective_power_info (a manual machine can be neither started nor stopped) and power_query (a
    non-queryable machine is recorded POWER_STATE.UNKNOWN)."""
    system_id = _enlist(maas, {"power_type": "manual"}).json()["system_id"]
    states = [_until(maas, system_id, "Ready")["power_state"]]
    _api(maas, "POST", f"machines/{system_id}/", params={"op": "deploy"})
    states.append(_until(maas, system_id, "Deployed")["power_state"])
    _api(maas, "POST", f"machines/{system_id}/", params={"op": "release"})
    states.append(_until(maas, system_id, "Ready")["power_state"])
    states.append(_api(maas, "GET", f"machines/{system_id}/", params={"op": "query_power_state"}).json()["state"])
    assert states == ["unknown"] * 4 and maas.power.calls == []


def test_an_anonymous_enlistment_from_a_known_new_machine_s_nic_updates_that_machine(maas: RunningMaas) -> None:
    """AnonMachinesHandler.create, "MAC enlistment": a machine in New or Commissioning with one of the MACs
    is updated (architecture, power) and returned; once it is past them, the MAC is in use (400)."""
    first = _enlist(maas, {"power_type": "manual"}, auth=False).json()
    again = _enlist(maas, {"hostname": "other", "power_type": "redfish", "power_parameters": json.dumps(REDFISH),
                           "mac_addresses": ["b8:ce:f6:00:07:09", "b8:ce:f6:00:07:01"]}, auth=False)
    assert again.status_code == 200 and again.json()["system_id"] == first["system_id"]
    machine = maas.sim.machines[first["system_id"]]
    assert (len(maas.sim.machines), machine.hostname, machine.power_type, machine.power_parameters) == (
        1, "gpu-s-1", "redfish", REDFISH)
    _api(maas, "POST", f"machines/{first['system_id']}/", params={"op": "commission"})
    _until(maas, first["system_id"], "Ready")
    taken = _enlist(maas, {"hostname": "third", "power_type": "manual"}, auth=False)
    assert (taken.status_code, taken.json()) == (400, {"mac_addresses": ["b8:ce:f6:00:07:01 is already in use on gpu-s-1."]})
