"""The firmware and BIOS baseline of a host class, and how `provision firmware|bios apply` rolls it out.

    host_classes:
      hgx-h200:
        firmware:
          components:                      # every component of the kind (and id glob) must run this version
            - {kind: bios, version: 2.3.5, image: {file: images/bios-2.3.5.exe, sha256: 9f2c...}}
            - {kind: bmc, min_version: 7.10.30.00}
            - {kind: hca, id: "InfiniBand.Slot.*", version: 28.43.1014}
          bios:                            # BIOS attributes, by the vendor's names, with the value wanted
            SysProfile: PerfOptimized
            ProcCStates: Disabled
            SriovGlobalEnable: Enabled
    firmware_rollout:                      # the site's: canary, batches, reboots at once, deadlines
      canary: 1
      batch_size: 8
      max_failures: 1
      max_rebooting_per_rack: 2
      max_rebooting: 16
      image_url: http://10.64.0.2:8088/     # where the BMCs fetch images from (the controller serves the folder)
      bios_apply_time: InMaintenanceWindowOnReset   # Immediate | OnReset | AtMaintenanceWindowStart | ...
      maintenance_window: {start: "2026-12-12T02:00:00Z", duration_s: 14400}

A host whose components or BIOS attributes differ from its class's baseline fails `firmware_drift` or
`bios_drift`; `policy.golden_requires_baseline` (default on) keeps such a host, or one never inventoried, from
golden.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator, model_validator

# The kinds provision.firmware.components.Kind classifies components into (tests/firmware pins they agree).
ComponentKind = Literal["bios", "bmc", "nic", "hca", "gpu", "baseboard", "psu", "cpld", "other"]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ID_GLOB = re.compile(r"^[A-Za-z0-9_.:*?\-\[\]]{1,128}$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FirmwareImage(_Model):
    file: str = Field(min_length=1, description="the image file, relative to the site file")
    sha256: str = Field(description="its SHA-256, checked before any BMC is told of it and again as it is served")

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        lowered = value.strip().lower()
        if not _SHA256.match(lowered):
            raise ValueError("sha256 must be 64 hex digits")
        return lowered

    @field_validator("file")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("file is a path under the site's folder (no leading '/', no '..')")
        return value


class ComponentPin(_Model):
    kind: ComponentKind
    id: str | None = Field(None, description="glob on the component's key or Redfish id (CX8_*, NIC.Slot.*); "
                           "none: every component of the kind")
    version: str | None = Field(None, min_length=1, max_length=128, description="exactly this version")
    min_version: str | None = Field(None, min_length=1, max_length=128, description="this version or newer")
    image: FirmwareImage | None = Field(None, description="what `provision firmware apply` installs")

    @field_validator("id")
    @classmethod
    def _glob(cls, value: str | None) -> str | None:
        if value is not None and not _ID_GLOB.match(value):
            raise ValueError(f"id {value!r} is not a Redfish id glob (letters, digits, _.:- and * ? [ ])")
        return value

    @model_validator(mode="after")
    def _one_version(self) -> Self:
        if (self.version is None) == (self.min_version is None):
            raise ValueError("give exactly one of version (exact) or min_version")
        return self

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.id}" if self.id else self.kind

    @property
    def wanted(self) -> str:
        return self.version if self.version is not None else f">= {self.min_version}"


BiosValue = str | int | bool


class FirmwareBaseline(_Model):
    components: list[ComponentPin] = Field(default_factory=list, max_length=256)
    bios: dict[str, BiosValue] = Field(default_factory=dict, description="BIOS attribute -> the value wanted")

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        labels = [p.label for p in self.components]
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise ValueError(f"components pinned twice: {', '.join(twice)}")
        return self

    @field_validator("bios")
    @classmethod
    def _names(cls, value: dict[str, BiosValue]) -> dict[str, BiosValue]:
        bad = [k for k in value if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", k)]
        if bad:
            raise ValueError(f"BIOS attribute names {bad} are not attribute names (letters, digits, _.-)")
        return value


ApplyTime = Literal["Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"]
WINDOWED = ("AtMaintenanceWindowStart", "InMaintenanceWindowOnReset")


class MaintenanceWindow(_Model):
    """When BIOS changes may apply (`@Redfish.SettingsApplyTime`'s MaintenanceWindowStartTime and
    MaintenanceWindowDurationInSeconds, DMTF Settings v1_4)."""

    start: datetime = Field(description="the window's start, with its UTC offset")
    duration_s: int = Field(ge=60, le=7 * 86_400, description="how long it lasts, in seconds")

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("start needs its UTC offset (e.g. 2026-12-12T02:00:00Z)")
        return value


class FirmwareRollout(_Model):
    """How firmware and BIOS changes reach the fleet: a canary first, then batches, few reboots at once."""

    canary: int = Field(1, ge=0, le=64, description="hosts done alone first; any failure among them stops the rollout")
    batch_size: int = Field(8, ge=1, le=4096, description="hosts per batch after the canary")
    max_failures: int = Field(1, ge=1, le=4096, description="failed hosts at which the rollout stops (after the "
                              "batch in flight)")
    max_rebooting: int = Field(16, ge=1, le=4096, description="hosts rebooting at once, site-wide (UFM, PXE, power)")
    max_rebooting_per_rack: int = Field(2, ge=1, le=64, description="hosts rebooting at once in one rack")
    task_timeout_s: float = Field(1800.0, gt=0, le=86_400, description="deadline of one update task on a BMC")
    bmc_return_timeout_s: float = Field(900.0, gt=0, le=7200, description="how long a BMC may stay away after "
                                        "its own update")
    reboot_timeout_s: float = Field(900.0, gt=0, le=7200, description="deadline of one host's reboot")
    poll_s: float = Field(5.0, gt=0, le=300, description="seconds between task and power reads")
    image_url: HttpUrl | None = Field(None, description="the controller's image server as the BMCs reach it "
                                      "(http://address:port/); `apply` serves the site folder's images there")
    image_listen: str | None = Field(None, description="address:port the controller binds the image server to "
                                     "(default: image_url's)")
    bios_apply_time: ApplyTime | None = Field(None, description="when BIOS changes apply (DMTF Settings ApplyTime); "
                                              "none: OnReset where the BMC lists it, else what it lists")
    maintenance_window: MaintenanceWindow | None = Field(None, description="the window the maintenance-window "
                                                         "apply times name")

    @model_validator(mode="after")
    def _window(self) -> Self:
        if self.bios_apply_time in WINDOWED and self.maintenance_window is None:
            raise ValueError(f"bios_apply_time {self.bios_apply_time} needs a maintenance_window (start, duration_s)")
        return self


def baseline_versions(baseline: FirmwareBaseline | None) -> dict[str, str]:
    """The baseline's exact HCA and GPU versions as the `versions` facts the roles and the health agent read
    (`hca_firmware`: what mlxfwmanager and sysfs report; `vbios`: nvidia-smi's VBIOS Version), from pins that hold
    every component of their kind (no id glob). Redfish reports both in the same form (GB300: CX8 40.45.3048,
    HGX_FW_GPU 97.10.3E.00.05)."""
    out: dict[str, str] = {}
    for pin in baseline.components if baseline is not None else ():
        if pin.version is not None and pin.id is None and pin.kind in ("hca", "gpu"):
            out["hca_firmware" if pin.kind == "hca" else "vbios"] = pin.version
    return out


def baseline_images(baseline: FirmwareBaseline | None, site_dir: Path) -> dict[str, dict[str, str]]:
    """The baseline's on-host images as the roles read them (`hca_firmware`: the image roles/hca_firmware burns
    with mlxfwmanager, from the pin that holds every HCA of the class), its path resolved beside the site file."""
    out: dict[str, dict[str, str]] = {}
    for pin in baseline.components if baseline is not None else ():
        if pin.kind == "hca" and pin.id is None and pin.version is not None and pin.image is not None:
            out["hca_firmware"] = {"image": str((site_dir / pin.image.file).resolve()), "sha256": pin.image.sha256}
    return out
