"""The two OData documents DSP0266 requires of every Redfish service (its "Service metadata" and "OData
service document" clauses):

- `/redfish/v1/$metadata`, the CSDL metadata document: one `edmx:Reference` per schema file the
  service's resources use, with an `edmx:Include` for each namespace of it they use (the unversioned
  one and each versioned one an `@odata.type` names), and the `Service` entity container;
- `/redfish/v1/odata`, the OData service document: the service root and each resource it links to.

Standard schemas are referenced at DMTF's published URIs (as a real iDRAC's `$metadata` does), so a
client resolves them from its own copy of DSP8010. The simulator has no OEM extensions, so it
references no OEM schema.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import quoteattr

METADATA = "/redfish/v1/$metadata"
ODATA = "/redfish/v1/odata"
XML_TYPE = "application/xml;charset=utf-8"
DMTF_SCHEMAS = "http://redfish.dmtf.org/schemas/v1"
SERVICE_ROOT_TYPE = "ServiceRoot.v1_11_0"
# Namespace → the versioned namespaces of it the resources use; each is in DSP8010 as `<Namespace>_v1.xml`.
# Those without versions hold types the resources use inside their own (Resource.Status, IPAddresses...).
# Settings, SoftwareInventory, Task and UpdateService are those of firmware.py (UpdateService, TaskService,
# Bios/Settings).
SCHEMAS: dict[str, tuple[str, ...]] = {
    "AccountService": ("AccountService.v1_5_0",),
    "Bios": ("Bios.v1_2_1",),
    "Chassis": ("Chassis.v1_14_0",),
    "ChassisCollection": (),
    "ComputerSystem": ("ComputerSystem.v1_12_0",),
    "ComputerSystemCollection": (),
    "EthernetInterface": ("EthernetInterface.v1_6_1",),
    "EthernetInterfaceCollection": (),
    "IPAddresses": (),
    "Manager": ("Manager.v1_9_0",),
    "ManagerAccount": ("ManagerAccount.v1_4_0",),
    "ManagerAccountCollection": (),
    "ManagerCollection": (),
    "Message": (),
    "NetworkAdapter": ("NetworkAdapter.v1_4_0",),
    "NetworkAdapterCollection": (),
    "NetworkDeviceFunction": ("NetworkDeviceFunction.v1_5_1",),
    "NetworkDeviceFunctionCollection": (),
    "NetworkPort": ("NetworkPort.v1_2_1",),
    "NetworkPortCollection": (),
    "Privileges": (),
    "Processor": ("Processor.v1_11_0",),
    "ProcessorCollection": (),
    "Resource": ("Resource.v1_0_0",),
    "Role": ("Role.v1_2_0",),
    "RoleCollection": (),
    "ServiceRoot": (SERVICE_ROOT_TYPE,),
    "Session": ("Session.v1_3_0",),
    "SessionCollection": (),
    "SessionService": ("SessionService.v1_1_8",),
    "Settings": ("Settings.v1_3_5",),
    "SoftwareInventory": ("SoftwareInventory.v1_5_0",),
    "SoftwareInventoryCollection": (),
    "Task": ("Task.v1_5_1",),
    "TaskCollection": (),
    "TaskService": ("TaskService.v1_1_4",),
    "UpdateService": ("UpdateService.v1_11_0",),
    "VLanNetworkInterface": (),
}


def schema_file(namespace: str) -> str:
    return f"{namespace}_v1.xml"


def _metadata_xml() -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">']
    for namespace, versions in sorted(SCHEMAS.items()):
        lines.append(f"  <edmx:Reference Uri={quoteattr(f'{DMTF_SCHEMAS}/{schema_file(namespace)}')}>")
        for included in (namespace, *versions):
            lines.append(f"    <edmx:Include Namespace={quoteattr(included)}/>")
        lines.append("  </edmx:Reference>")
    lines += [
        f'  <edmx:Reference Uri="{DMTF_SCHEMAS}/RedfishExtensions_v1.xml">',
        '    <edmx:Include Namespace="RedfishExtensions.v1_0_0" Alias="Redfish"/>',
        "  </edmx:Reference>",
        "  <edmx:DataServices>",
        '    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">',
        f'      <EntityContainer Name="Service" Extends="{SERVICE_ROOT_TYPE}.ServiceContainer"/>',
        "    </Schema>",
        "  </edmx:DataServices>",
        "</edmx:Edmx>",
    ]
    return ("\n".join(lines) + "\n").encode()


METADATA_XML = _metadata_xml()


def service_document(root: dict[str, Any]) -> dict[str, Any]:
    """The OData service document for a service root: each resource it links to, as a singleton."""
    links = {k: v for k, v in root.items() if isinstance(v, dict) and set(v) == {"@odata.id"}}
    sessions = root.get("Links", {}).get("Sessions")
    if isinstance(sessions, dict):
        links["Sessions"] = sessions
    return {
        "@odata.context": METADATA,
        "value": [{"kind": "Singleton", "name": "Service", "url": root["@odata.id"] + "/"}]
        + [{"kind": "Singleton", "name": name, "url": link["@odata.id"]} for name, link in sorted(links.items())],
    }
