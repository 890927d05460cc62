"""How MAAS shows a machine over its API: the full record an authenticated read answers, and the short one an
anonymous enlistment gets back.

The fields are MAAS 3.5's (`DISPLAYED_MACHINE_FIELDS` in maasserver/api/machines.py, tag 3.5.13: 79 names, of
which `constraints_by_type` appears only in an allocation's answer, plus `resource_uri`); MAAS 3.4 shows the same
but `error_description` (78, tag 3.4.10). The shapes of the values (nested domain, zone, pool, interfaces and
their links, test statuses, hardware_info, numanode_set, default_gateways) follow a real MAAS answer, the
ystia/yorc capture in tests/fixtures/maas/ (72 fields, MAAS 2.x); the fields it predates (workload_annotations,
last_sync, sync_interval, next_sync, enable_hw_sync, ephemeral_deploy, error_description, parent) follow the
handler's own methods and model fields in maasserver. What the simulator does not model (disks, NUMA topology,
hardware details, tests) is shown as MAAS shows a machine it has no such data for: empty lists, zeros, null,
"Unknown" (a test status with no results is -1, maasserver/api/nodes.py get_script_status_name).
"""

from __future__ import annotations

from typing import Any

from sim.maas.machines import DEPLOY_SUBNET, STATUS_NAMES, Machine, NodeStatus

API_ROOT = "/MAAS/api/2.0"
UNKNOWN = -1  # a test or script status with no results: MAAS shows -1, "Unknown"
SCRIPT_STATUS_NAMES = {UNKNOWN: "Unknown", 0: "Pending", 1: "Running", 2: "Passed", 3: "Failed", 4: "Timed out"}
HARDWARE_INFO_KEYS = (
    "system_vendor", "system_product", "system_family", "system_version", "system_sku", "system_serial",
    "cpu_model", "mainboard_vendor", "mainboard_product", "mainboard_serial", "mainboard_version",
    "mainboard_firmware_vendor", "mainboard_firmware_date", "mainboard_firmware_version", "chassis_vendor",
    "chassis_type", "chassis_serial", "chassis_version",
)
# The test statuses MAAS shows for each hardware type, each with its `_name`.
TEST_STATUSES = ("testing", "cpu_test", "memory_test", "network_test", "storage_test", "other_test",
                 "interface_test")
# DISPLAYED_ANON_MACHINE_FIELDS: all an anonymous caller is shown of a machine.
ANON_FIELDS = ("system_id", "hostname", "domain", "fqdn", "architecture", "status", "power_type", "power_state",
               "zone", "status_action", "status_message", "status_name", "node_type")


def _domain(name: str) -> dict[str, Any]:
    return {"authoritative": True, "ttl": None, "is_default": True, "resource_record_count": 0, "id": 0,
            "name": name, "resource_uri": f"{API_ROOT}/domains/0/"}


ZONE = {"name": "default", "description": "", "id": 1, "resource_uri": f"{API_ROOT}/zones/default/"}
POOL = {"name": "default", "description": "Default pool", "id": 0, "resource_uri": f"{API_ROOT}/resourcepool/0/"}


def _links(machine: Machine, index: int) -> list[dict[str, Any]]:
    """The boot interface's AUTO link once deployed (the address MAAS assigned it), else none."""
    if index != 0 or not machine.ip_addresses:
        return []
    subnet = {"name": str(DEPLOY_SUBNET), "cidr": str(DEPLOY_SUBNET), "gateway_ip": str(DEPLOY_SUBNET[1]),
              "id": 1, "resource_uri": f"{API_ROOT}/subnets/1/"}
    return [{"id": machine.interface_ids[0], "mode": "auto", "ip_address": machine.ip_addresses[0],
             "subnet": subnet}]


def _interfaces(machine: Machine) -> list[dict[str, Any]]:
    return [
        {"id": iid, "name": f"eth{i}", "type": "physical", "mac_address": mac, "enabled": True,
         "system_id": machine.system_id, "vlan": None, "link_connected": True, "children": [],
         "parents": [], "links": _links(machine, i), "numa_node": 0, "sriov_max_vf": 0,
         "firmware_version": None, "effective_mtu": 1500, "params": {}, "link_speed": 0, "interface_speed": 0,
         "product": None, "vendor": None, "discovered": None, "tags": [],
         "resource_uri": f"{API_ROOT}/nodes/{machine.system_id}/interfaces/{iid}/"}
        for i, (iid, mac) in enumerate(zip(machine.interface_ids, machine.macs, strict=True))
    ]


def machine_json(machine: Machine, domain: str = "maas") -> dict[str, Any]:
    """The record MAAS 3.5 answers an authenticated read (and every action) with: 79 fields."""
    interfaces = _interfaces(machine)
    deployed = machine.status is NodeStatus.DEPLOYED
    record: dict[str, Any] = {
        "system_id": machine.system_id,
        "hostname": machine.hostname,
        "description": "",
        "hardware_uuid": None,
        "domain": _domain(domain),
        "fqdn": f"{machine.hostname}.{domain}",
        "owner": machine.owner,
        "owner_data": {},
        "locked": False,
        "cache_sets": [],
        "bcaches": [],
        "bios_boot_method": "pxe" if machine.commissioning_status == 2 else None,
        "boot_interface": interfaces[0] if interfaces else None,
        "architecture": machine.architecture,
        "min_hwe_kernel": "",
        "hwe_kernel": None,
        "cpu_count": 0,
        "cpu_speed": 0,
        "memory": 0,
        "swap_size": None,
        "storage": 0.0,
        "status": int(machine.status),
        "osystem": machine.osystem,
        "distro_series": machine.distro_series,
        "ephemeral_deploy": False,
        "error_description": "",
        "netboot": not deployed,
        "power_type": machine.power_type,
        "power_state": machine.power_state,
        "tag_names": [],
        "address_ttl": None,
        "ip_addresses": list(machine.ip_addresses),
        "interface_set": interfaces,
        "zone": dict(ZONE),
        "pool": dict(POOL),
        "disable_ipv4": False,
        "boot_disk": None,
        "blockdevice_set": [],
        "physicalblockdevice_set": [],
        "virtualblockdevice_set": [],
        "volume_groups": [],
        "raids": [],
        "status_action": "",
        "status_message": machine.status_message,
        "status_name": STATUS_NAMES[machine.status],
        "node_type": 0,
        "node_type_name": "Machine",
        "special_filesystems": [],
        "parent": None,
        "pod": None,
        "default_gateways": {"ipv4": {"gateway_ip": None, "link_id": None},
                             "ipv6": {"gateway_ip": None, "link_id": None}},
        "current_commissioning_result_id": machine.commissioning_result_id,
        "current_testing_result_id": None,
        "current_installation_result_id": None,
        "commissioning_status": machine.commissioning_status,
        "commissioning_status_name": SCRIPT_STATUS_NAMES.get(machine.commissioning_status, "Unknown"),
        "hardware_info": dict.fromkeys(HARDWARE_INFO_KEYS, "Unknown"),
        "numanode_set": [{"index": 0, "memory": 0, "cores": [], "hugepages_set": []}],
        "virtualmachine_id": None,
        "workload_annotations": {},
        "last_sync": None,
        "sync_interval": None,
        "next_sync": None,
        "enable_hw_sync": False,
        "resource_uri": f"{API_ROOT}/machines/{machine.system_id}/",
    }
    for test in TEST_STATUSES:
        record[f"{test}_status"], record[f"{test}_status_name"] = UNKNOWN, "Unknown"
    return record


def anon_machine_json(machine: Machine, domain: str = "maas") -> dict[str, Any]:
    """What an anonymous enlistment gets back (AnonMachineHandler's fields and its resource_uri)."""
    full = machine_json(machine, domain)
    return {**{name: full[name] for name in ANON_FIELDS}, "resource_uri": full["resource_uri"]}
