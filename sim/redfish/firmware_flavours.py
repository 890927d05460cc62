"""The three shapes a simulated BMC serves its firmware in: Dell iDRAC (the default), HPE iLO and NVIDIA HGX.

Each is shaped from a real crawl (tests/fixtures/redfish/firmware/SOURCE.md; REFERENCE-wave3 B4):
- `idrac`: FirmwareInventory ids `Installed-<ComponentID>-<version>__<FQDD>` (akaliwod/iserver's R650 crawl, the
  id changes with the version), SimpleUpdate and the multipart push at `UpdateService/MultipartUpload`, tasks
  `TaskService/Tasks/JID_<n>`, Bios SupportedApplyTimes OnReset, AtMaintenanceWindowStart,
  InMaintenanceWindowOnReset (no Immediate), the Dell job queue (firmware_jobs.py);
- `ilo`: the HPE iLO emulator crawl (DL380a Gen11, `hpe_ilo_emulator/`): numbered ids (`1` "iLO 6" SystemBMC,
  `2` "System ROM" SystemRomActive, `3` Intelligent Platform Abstraction Data, `4` System Programmable Logic
  Device), SimpleUpdate with no task: progress is `UpdateService.Oem.Hpe.State` (Idle, Updating, Complete,
  Error) with `FlashProgressPercent` (REFERENCE-wave3 B4, python-redfish-utility's FirmwareUpdateCommand), no
  Redfish multipart push (iLO's HttpPushUri is `/cgi-bin/uploadFile`), Bios `@Redfish.Settings` naming
  `.../bios/settings` and no SupportedApplyTimes;
- `hgx`: the NVIDIA GB300 crawl (`supermicro_gb300/`): ids `FW_BMC_0`, `FW_CPLD_0`, `NIC_1`, `CX8_<n>`,
  `HGX_FW_BMC_0`, `HGX_FW_ERoT_BMC_0`, `HGX_FW_FPGA_0`, `HGX_PCIeSwitchConfig_0`, `HGX_FW_GPU_<n>` and
  `HGX_InfoROM_GPU_<n>` (RelatedItem `Chassis/HGX_GPU_<n>`, `Oem.Nvidia.ActiveFirmwareSlot/InactiveFirmwareSlot`),
  the BIOS as a GUID id "BIOS Firmware"; an 8-GPU baseboard adds `HGX_FW_NVSwitch_0..3` (the HGX H100 target
  list of HPE's Cray XD670 update module); no SimpleUpdate, only `MultipartHttpPushUri`
  `/redfish/v1/UpdateService/update-multipart` with OperationApplyTimeSupport `["Immediate"]`, whose
  UpdateParameters `Targets` (FirmwareInventory URIs) name the components the image goes to; tasks at
  `TaskService/Tasks/<n>`; Bios `@Redfish.Settings` with no SupportedApplyTimes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sim.redfish import tree

UPDATE = f"{tree.V1}/UpdateService"
INVENTORY = f"{UPDATE}/FirmwareInventory"
SIMPLE_UPDATE = f"{UPDATE}/Actions/UpdateService.SimpleUpdate"
BIOS = f"{tree.SYSTEM}/Bios"
R650_APPLY_TIMES = ("OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset")
# iDRAC ComponentIDs as the FirmwareInventory ids carry them (Installed-<ComponentID>-<version>__<FQDD>).
_COMPONENT_IDS = {"bios": "159", "bmc": "25227", "nic": "105164", "hca": "108255", "gpu": "109140", "psu": "104341",
                  "cpld": "27763"}
_GB300_BIOS_ID = "AB86B73D_8D56_41E4_971E_B11DB71F2E33"


class Flavour(StrEnum):
    idrac = "idrac"
    ilo = "ilo"
    hgx = "hgx"


@dataclass(frozen=True)
class Shape:
    push: str | None  # the MultipartHttpPushUri
    simple_update: bool
    settings: str  # the Bios SettingsObject
    apply_times: tuple[str, ...]  # the Bios SupportedApplyTimes it lists (empty: it lists none)
    task_prefix: str  # task ids: JID_<n> on an iDRAC, plain numbers elsewhere


SHAPES = {
    Flavour.idrac: Shape(f"{UPDATE}/MultipartUpload", True, f"{BIOS}/Settings", R650_APPLY_TIMES, "JID_"),
    Flavour.ilo: Shape(None, True, f"{BIOS}/settings", (), ""),
    Flavour.hgx: Shape(f"{UPDATE}/update-multipart", False, f"{BIOS}/Settings", (), ""),
}


@dataclass
class SimComponent:
    fqdd: str  # the slot: a Dell FQDD, else the (stable) Redfish id
    kind: str  # the stand-in image kind it takes (firmware_config.IMAGE_HEADER)
    name: str
    version: str
    updateable: bool = True
    ident: str | None = None  # the Redfish id where it is not Dell's Installed-... form
    description: str | None = None
    related: tuple[str, ...] = ()
    manufacturer: str | None = None

    @property
    def rid(self) -> str:
        if self.ident is not None:
            return self.ident
        return f"Installed-{_COMPONENT_IDS.get(self.kind, '0')}-{self.version}__{self.fqdd}"


def _idrac(versions: dict[str, str], hcas: int, gpus: int, gpu_model: str) -> list[SimComponent]:
    comps = [SimComponent("BIOS.Setup.1-1", "bios", "BIOS", versions["bios"]),
             SimComponent("iDRAC.Embedded.1-1", "bmc", "Integrated Dell Remote Access Controller", versions["bmc"]),
             SimComponent("NIC.Integrated.1-1-1", "nic", "Mellanox ConnectX-6 Lx 2x25G OCP NIC", versions["nic"]),
             SimComponent("CPLD.Embedded.1", "cpld", "System CPLD", versions["cpld"]),
             SimComponent("PSU.Slot.1", "psu", "Power Supply.Slot.1", versions["psu"])]
    comps += [SimComponent(f"InfiniBand.Slot.{31 + i}-1", "hca", "Mellanox ConnectX-7 Single Port NDR InfiniBand",
                           versions["hca"]) for i in range(hcas)]
    comps += [SimComponent(f"Video.Slot.{20 + i}-1", "gpu", f"{gpu_model} VBIOS", versions["gpu"])
              for i in range(gpus)]
    return comps


def _ilo(versions: dict[str, str], hcas: int, gpus: int, gpu_model: str) -> list[SimComponent]:
    made = [("bmc", "iLO 6", "SystemBMC", versions["bmc"]), ("bios", "System ROM", "SystemRomActive", versions["bios"]),
            ("other", "Intelligent Platform Abstraction Data", "PlatformDefinitionTable", "11.7.0 Build 23"),
            ("cpld", "System Programmable Logic Device", "SystemProgrammableLogicDevice", versions["cpld"]),
            ("nic", "Mellanox ConnectX-6 Lx 2x25G OCP NIC", "OCP Slot 1", versions["nic"]),
            ("psu", "Power Supply Firmware", "Bay 1", versions["psu"])]
    made += [("hca", "NVIDIA ConnectX-7 Single Port NDR InfiniBand Adapter", f"PCI-E Slot {i + 1}", versions["hca"])
             for i in range(hcas)]
    made += [("gpu", f"{gpu_model} VBIOS", f"PCI-E Slot {hcas + i + 1}", versions["gpu"]) for i in range(gpus)]
    return [SimComponent(str(n), kind, name, version, ident=str(n), description=desc, manufacturer="HPE")
            for n, (kind, name, desc, version) in enumerate(made, 1)]


def _hgx(versions: dict[str, str], hcas: int, gpus: int, gpu_model: str) -> list[SimComponent]:
    def nv(rid: str, kind: str, version: str, related: str | None = None, description: str = "Other image",
           maker: str = "NVIDIA", updateable: bool = True) -> SimComponent:
        return SimComponent(rid, kind, "Software Inventory", version, updateable, rid, description,
                            (related,) if related else (), maker)

    comps = [nv(_GB300_BIOS_ID, "bios", versions["bios"], maker="Supermicro", updateable=False),
             nv("FW_BMC_0", "bmc", versions["bmc"], f"{tree.V1}/Managers/BMC_0", "BMC image", maker=""),
             nv("FW_CPLD_0", "cpld", versions["cpld"], maker="Lattice"), nv("NIC_1", "nic", versions["nic"])]
    comps[0].name = "BIOS Firmware"
    comps += [nv(f"CX8_{i}", "hca", versions["hca"]) for i in range(hcas)]
    board = versions["baseboard"]
    comps += [nv("HGX_FW_BMC_0", "baseboard", board, f"{tree.V1}/Chassis/HGX_BMC_0", "BMC image"),
              nv("HGX_FW_ERoT_BMC_0", "baseboard", board, f"{tree.V1}/Chassis/HGX_ERoT_BMC_0"),
              nv("HGX_FW_FPGA_0", "baseboard", board, f"{tree.V1}/Chassis/HGX_FPGA_0"),
              nv("HGX_PCIeSwitchConfig_0", "baseboard", board, updateable=False)]
    if gpus == 8:  # an HGX 8-GPU baseboard carries 4 NVSwitches
        comps += [nv(f"HGX_FW_NVSwitch_{i}", "baseboard", board, f"{tree.V1}/Chassis/HGX_NVSwitch_{i}")
                  for i in range(4)]
    for i in range(gpus):
        comps += [nv(f"HGX_FW_GPU_{i}", "gpu", versions["gpu"], f"{tree.V1}/Chassis/HGX_GPU_{i}"),
                  nv(f"HGX_InfoROM_GPU_{i}", "inforom", versions["inforom"], f"{tree.V1}/Chassis/HGX_GPU_{i}")]
    return comps


_BUILDERS = {Flavour.idrac: _idrac, Flavour.ilo: _ilo, Flavour.hgx: _hgx}


def components(flavour: Flavour, versions: dict[str, str], hcas: int, gpus: int, gpu_model: str
               ) -> list[SimComponent]:
    return _BUILDERS[flavour](versions, hcas, gpus, gpu_model)


def member(flavour: Flavour, comp: SimComponent, path: str, staged: str | None) -> dict[str, Any]:
    """One FirmwareInventory member as the flavour's BMC renders it; `staged`: a version waiting for a reboot."""
    out: dict[str, Any] = {
        "@odata.id": path, "@odata.type": "#SoftwareInventory.v1_5_0.SoftwareInventory", "Id": comp.rid,
        "Name": comp.name, "Version": comp.version, "Updateable": comp.updateable,
        "Status": {"Health": "OK", "State": "Enabled"}}
    if comp.description:
        out["Description"] = comp.description
    if comp.manufacturer:
        out["Manufacturer"] = comp.manufacturer
    if flavour is Flavour.idrac:
        out["SoftwareId"] = comp.rid.split("-")[1]
    elif flavour is Flavour.hgx:
        out["RelatedItem"] = [tree.ref(r) for r in comp.related]
        out["RelatedItem@odata.count"] = len(comp.related)
        if comp.manufacturer == "NVIDIA":
            out["Oem"] = {"Nvidia": {
                "@odata.type": "#NvidiaSoftwareInventory.v1_2_0.NvidiaSoftwareInventory",
                "ActiveFirmwareSlot": {"FirmwareState": "Activated", "SlotId": 0, "Version": comp.version},
                "InactiveFirmwareSlot": {"FirmwareState": "Inactive", "SlotId": 1, "Version": staged or comp.version},
                "StageOnlyUpdateOptionSupported": True}}
    return out


@dataclass
class HpeState:
    """iLO's one update at a time, as `UpdateService.Oem.Hpe` reports it."""

    state: str = "Idle"
    percent: int = 0
    result: dict[str, str] = field(default_factory=dict)


def update_service(flavour: Flavour, *, simple: bool, hpe: HpeState | None) -> dict[str, Any]:
    shape = SHAPES[flavour]
    out: dict[str, Any] = {"@odata.id": UPDATE, "@odata.type": "#UpdateService.v1_11_0.UpdateService",
                           "Id": "UpdateService", "Name": "Update Service", "ServiceEnabled": True,
                           "FirmwareInventory": tree.ref(INVENTORY), "Actions": {}}
    if simple and shape.simple_update:
        out["Actions"]["#UpdateService.SimpleUpdate"] = {
            "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"], "target": SIMPLE_UPDATE}
    if shape.push is not None:
        out["MultipartHttpPushUri"] = shape.push
    if flavour is Flavour.ilo:
        out["HttpPushUri"] = "/cgi-bin/uploadFile"
        now = hpe or HpeState()
        out["Oem"] = {"Hpe": {"@odata.type": "#HpeiLOUpdateServiceExt.v2_6_0.HpeiLOUpdateServiceExt",
                              "State": now.state, "FlashProgressPercent": now.percent, "Result": dict(now.result)}}
    elif flavour is Flavour.hgx:
        out.update({"HttpPushUri": f"{UPDATE}/update", "MaxImageSizeBytes": 209715200,
                    "MultipartHttpPushUri@Redfish.OperationApplyTimeSupport": {
                        "@odata.type": "#Settings.v1_3_3.OperationApplyTimeSupport", "SupportedValues": ["Immediate"]},
                    "Oem": {"Nvidia": {"@odata.type": "#NvidiaUpdateService.v1_3_0.NvidiaUpdateService",
                                       "MultipartHttpPushUriOptions": {
                                           "UpdateOptionSupport": ["StageAndActivate", "StageOnly"]}}}})
    return out


def targets_of(raw: Any, inventory: Sequence[SimComponent]) -> list[SimComponent] | str | None:
    """The components an update's `Targets` (FirmwareInventory URIs) name; None for none given (every component
    the image is for); a string: why the list is refused (not a list of this BMC's inventory URIs)."""
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        return "Targets must be a list of URIs"
    by_path = {f"{INVENTORY}/{c.rid}": c for c in inventory}
    out = []
    for target in raw:
        found = by_path.get(target.rstrip("/"))
        if found is None:
            return f"The value {target} for the parameter Targets is not in the list of acceptable values."
        out.append(found)
    return out
