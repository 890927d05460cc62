"""Firmware components as a BMC lists them: `UpdateService/FirmwareInventory` members (SoftwareInventory) to
frozen `Component`s. Pure, no I/O.

Each component keeps its Redfish id, name, version, updateable flag, the devices it applies to (RelatedItem)
and a kind (bios, bmc, nic, hca, gpu, baseboard, psu, cpld, other) read from what the vendors put in the
ids, names and descriptions (real crawls in tests/fixtures/redfish/firmware/):
- NVIDIA HGX/GB300 BMC (Supermicro): `FW_BMC_0` ("BMC image", RelatedItem Managers/BMC_0), `HGX_FW_GPU_0`,
  `HGX_InfoROM_GPU_0`, `HGX_FW_ERoT_*`, `HGX_FW_FPGA_*`, `HGX_PCIeSwitchConfig_0`, `CX8_0` (ConnectX-8),
  `NIC_1`, `FW_CPLD_0`, and the BIOS as a GUID id named "BIOS Firmware";
- HPE iLO: numbered ids whose Description says what they are (`SystemBMC` "iLO 6", `SystemRomActive`
  "System ROM", `SystemProgrammableLogicDevice`);
- Dell iDRAC: `Installed-<ComponentID>-<version>__<FQDD>` (and `Current-`/`Previous-`/`Available-`; only the
  installed ones are running), the FQDD naming the device (`BIOS.Setup.1-1`, `iDRAC.Embedded.1-1`,
  `NIC.Integrated.1-1-1`, `InfiniBand.Slot.31-1`, `PSU.Slot.1`) (REFERENCE-wave3 B4: akaliwod/iserver's R650
  crawl, dellemc-openmanage-ansible-modules' idrac_gather_facts).
A Dell id changes with the version it carries: `key` (the FQDD there, the id elsewhere) names the slot that
stays put across an update.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from provision.state.peer_text import shown

MAX_TEXT = 128


class Kind(StrEnum):
    bios = "bios"
    bmc = "bmc"
    nic = "nic"
    hca = "hca"
    gpu = "gpu"
    baseboard = "baseboard"
    psu = "psu"
    cpld = "cpld"
    other = "other"


@dataclass(frozen=True)
class Component:
    id: str  # the Redfish Id (the last segment of its @odata.id)
    key: str  # the slot it fills, stable across updates (Dell: the FQDD; others: the id)
    kind: Kind
    name: str
    version: str | None
    updateable: bool
    path: str
    related: tuple[str, ...] = ()  # @odata.id of the devices it applies to
    manufacturer: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "kind": self.kind.value, "name": self.name,
                "version": self.version, "updateable": self.updateable, "path": self.path,
                "related": list(self.related), "manufacturer": self.manufacturer}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Component:
        return cls(str(data["id"]), str(data["key"]), Kind(data["kind"]), str(data["name"]), data.get("version"),
                   bool(data["updateable"]), str(data["path"]), tuple(data.get("related") or ()),
                   data.get("manufacturer"))


_DELL_ID = re.compile(r"^(Installed|Current|Previous|Available)-[0-9A-Za-z]+-(.+?)__(.+)$")
# Checked in order, on the id, FQDD, name and description together (upper case, separators as spaces).
_RULES: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    (Kind.bios, re.compile(r"\bBIOS\b|SYSTEM ?ROM|\bUEFI\b")),
    (Kind.cpld, re.compile(r"\bCPLD\b|PROGRAMMABLE ?LOGIC")),
    (Kind.psu, re.compile(r"\bPSU\b|POWER ?SUPPLY")),
    (Kind.gpu, re.compile(r"\bGPU\b|\bVIDEO\b|INFOROM|\bVBIOS\b")),
    (Kind.hca, re.compile(r"INFINIBAND")),
    (Kind.nic, re.compile(r"\bNIC\b|ETHERNET|NETWORK ?ADAPTER|\bLOM\b")),
    (Kind.hca, re.compile(r"\bCX\d|CONNECTX|\bHCA\b|BLUEFIELD")),
    (Kind.baseboard, re.compile(r"\bHGX\b|BASEBOARD|\bEROT\b|\bFPGA\b|PCIE ?SWITCH|\bRETIMER\b")),
    (Kind.bmc, re.compile(r"\bBMC\b|SYSTEMBMC|IDRAC|\bILO\b|\bXCC\b|\bMANAGER\b")),
)


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return shown(value.strip()[:MAX_TEXT])


def _related(data: Mapping[str, Any]) -> tuple[str, ...]:
    items = data.get("RelatedItem")
    if not isinstance(items, list):
        return ()
    out = [item["@odata.id"] for item in items[:64]
           if isinstance(item, Mapping) and isinstance(item.get("@odata.id"), str)]
    return tuple(shown(o[:256]) for o in out)


# Dell FQDD prefixes name the device class outright (the name of an Ethernet ConnectX says ConnectX too).
_FQDD = {"BIOS": Kind.bios, "iDRAC": Kind.bmc, "NIC": Kind.nic, "InfiniBand": Kind.hca, "Video": Kind.gpu,
         "GPU": Kind.gpu, "PSU": Kind.psu, "CPLD": Kind.cpld}


def classify(rid: str, name: str | None, description: str | None, related: tuple[str, ...]) -> Kind:
    """The component's kind from its id, name and description; a component related only to a Manager is the BMC."""
    fqdd = _FQDD.get(rid.split(".", 1)[0]) if "." in rid else None
    if fqdd is not None:
        return fqdd
    words = " ".join(x for x in (rid, name, description) if x)
    upper = re.sub(r"[_\-.:/()]+", " ", words).upper()
    if upper.startswith("HGX ") and not re.search(r"\bGPU\b|INFOROM|\bCPLD\b", upper):
        return Kind.baseboard  # the HGX tray's own BMC, ERoTs, FPGA, CPUs, PCIe switches: its baseboard
    for kind, pattern in _RULES:
        if pattern.search(upper):
            return kind
    if related and all("/Managers/" in r for r in related):
        return Kind.bmc
    return Kind.other


def parse_component(data: Mapping[str, Any]) -> Component | None:
    """One FirmwareInventory member; None for one that is not installed (a Dell `Previous-`/`Available-` image)
    or has no id. Raises nothing: what a BMC leaves out stays None."""
    path = data.get("@odata.id")
    rid = _text(data.get("Id")) or (_text(path.rstrip("/").rsplit("/", 1)[-1]) if isinstance(path, str) else None)
    if rid is None:
        return None
    key = rid
    dell = _DELL_ID.match(rid)
    if dell is not None:
        if dell.group(1) in ("Previous", "Available"):
            return None
        key = dell.group(3)
    name = _text(data.get("Name")) or rid
    description = _text(data.get("Description"))
    related = _related(data)
    manufacturer = _text(data.get("Manufacturer"))
    # A generic Name ("Software Inventory") says nothing: the description or the id is the better label.
    label = name if name not in ("Software Inventory", "Firmware Inventory") else (description or rid)
    kind = classify(key if dell else rid, label, description, related)
    return Component(rid, key, kind, label, _text(data.get("Version")), data.get("Updateable") is True,
                     shown(path[:256]) if isinstance(path, str) else rid, related, manufacturer)


def parse_components(members: Sequence[Mapping[str, Any]]) -> tuple[Component, ...]:
    """Every installed component, in the BMC's order, one per key (a Dell `Current-` twin of an `Installed-`
    entry is the same slot)."""
    seen: dict[str, Component] = {}
    for member in members:
        found = parse_component(member)
        if found is not None and found.key not in seen:
            seen[found.key] = found
    return tuple(seen.values())
