"""What a simulated BMC's firmware is: its components and versions, its BIOS attributes, its firmware faults.

A host runs its class's baseline (`host_classes.<c>.firmware`: each pin's version, or its min_version), else
the class's `versions` (bios, bmc_firmware, hca_firmware, vbios), else the simulator's defaults. The site's
simulator file `firmware-sim.yml`, beside the site file, takes hosts off it and injects faults:

    installed:                       # per host, by component kind: what it runs instead
      gpu-r1-03: {bios: 1.13.0}
    bios:                            # per host: BIOS attributes that differ
      gpu-r1-04: {SysProfile: PerfPerWattOptimizedOs}
    faults:                          # per host: how its updates misbehave
      gpu-r2-02: [update_fails]
    flavour:                         # per host: the BMC's shape, idrac (default), ilo or hgx (firmware_flavours.py)
      gpu-r3-01: hgx
    apply_times:                     # per host: the Bios SupportedApplyTimes it lists instead of its flavour's
      gpu-r3-01: [Immediate, OnReset]

Faults: update_fails (the task ends in Exception half-way), task_hangs (it stays Running), bmc_gone_long (after
its own update the BMC stays away 60 s instead of `bmc_reboot_s`), version_unchanged (a staged update is lost at
the reboot), setting_refused (PATCH Bios/Settings answers 400 PropertyValueNotInList), bios_not_applied (pending
attributes are dropped at the reboot), update_refused (SimpleUpdate answers 400), task_off_bmc (the task monitor
Location names another host), no_simple_update (only the multipart push is offered).

Images: the simulated BMC downloads `ImageURI` (loopback only) and installs what its first line says, in the
stand-in format `BRINGUP-SIM-FIRMWARE kind=<kind> version=<version>`; any other content fails the task as an
iDRAC fails a package that is not for the system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from provision.site import Host, Site
from sim.redfish.firmware_flavours import Flavour, SimComponent, components

DEFAULT_VERSIONS = {"bios": "1.14.1", "bmc": "7.10.30.00", "nic": "22.36.10.10", "hca": "20.39.2048",
                    "gpu": "96.00.A5.00.1A", "psu": "00.1D.7D", "cpld": "1.0.6", "baseboard": "GB200Nvl-25.07-7",
                    "inforom": "G548.0301.00.03"}
# Attributes the simulated BIOS carries besides those tree.py renders (a Dell R650's names and defaults).
DEFAULT_BIOS = {"ProcCStates": "Enabled", "ProcC1E": "Enabled", "LogicalProc": "Enabled",
                "ProcVirtualization": "Enabled", "SriovGlobalEnable": "Disabled", "MemFrequency": "MaxPerf",
                "WorkloadProfile": "NotAvailable"}
IMAGE_HEADER = re.compile(rb"^BRINGUP-SIM-FIRMWARE kind=([a-z]+) version=([A-Za-z0-9._\-]{1,64})\s*$", re.M)
SIM_FILE = "firmware-sim.yml"
SECTIONS = {"installed", "bios", "faults", "flavour", "apply_times"}
APPLY_TIMES = ("Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset")  # Settings v1_4


class FirmwareFault(StrEnum):
    update_fails = "update_fails"
    task_hangs = "task_hangs"
    bmc_gone_long = "bmc_gone_long"
    version_unchanged = "version_unchanged"
    setting_refused = "setting_refused"
    bios_not_applied = "bios_not_applied"
    update_refused = "update_refused"
    task_off_bmc = "task_off_bmc"
    no_simple_update = "no_simple_update"  # only the MultipartHttpPushUri is offered (as NVIDIA's HGX BMC)


@dataclass
class HostFirmwareConfig:
    components: list[SimComponent]
    bios: dict[str, Any]
    faults: frozenset[FirmwareFault] = field(default_factory=frozenset)
    flavour: Flavour = Flavour.idrac
    apply_times: tuple[str, ...] | None = None  # None: the flavour's own list


def _pinned(site: Site, host: Host) -> dict[str, str]:
    cls = site.host_class(host)
    out = dict(DEFAULT_VERSIONS)
    v = cls.versions
    for kind, given in (("bios", v.bios), ("bmc", v.bmc_firmware), ("hca", v.hca_firmware), ("gpu", v.vbios)):
        if given:
            out[kind] = given
    if cls.firmware is not None:
        for pin in cls.firmware.components:
            out[pin.kind] = pin.version or pin.min_version or out.get(pin.kind, "1.0")
    return out


def _components(site: Site, host: Host, versions: dict[str, str], flavour: Flavour) -> list[SimComponent]:
    cls = site.host_class(host)
    gpus, model = (cls.gpu.count, cls.gpu.model) if cls.gpu is not None else (0, "")
    return components(flavour, versions, cls.ib.hca_count if cls.ib else 0, gpus, model)


def load_sim_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not set(data) <= SECTIONS:
        raise ValueError(f"{path}: expected a mapping with {', '.join(sorted(SECTIONS))}")
    return data


def host_config(site: Site, host: Host, sim: dict[str, Any]) -> HostFirmwareConfig:
    versions = _pinned(site, host)
    versions.update({str(k): str(v) for k, v in ((sim.get("installed") or {}).get(host.hostname) or {}).items()})
    cls = site.host_class(host)
    bios: dict[str, Any] = dict(DEFAULT_BIOS)
    if cls.firmware is not None:
        bios.update(cls.firmware.bios)
    bios.update((sim.get("bios") or {}).get(host.hostname) or {})
    faults = frozenset(FirmwareFault(str(f)) for f in ((sim.get("faults") or {}).get(host.hostname) or ()))
    flavour = Flavour(str((sim.get("flavour") or {}).get(host.hostname, "idrac")))
    times = (sim.get("apply_times") or {}).get(host.hostname)
    if times is not None and not (isinstance(times, list) and set(times) <= set(APPLY_TIMES)):
        raise ValueError(f"{SIM_FILE}: apply_times of {host.hostname} must be a list of {', '.join(APPLY_TIMES)}")
    return HostFirmwareConfig(_components(site, host, versions, flavour), bios, faults, flavour,
                              None if times is None else tuple(times))


def site_configs(site: Site) -> dict[str, HostFirmwareConfig]:
    sim = load_sim_file(site.directory / SIM_FILE)
    unknown = sorted({n for section in sim.values() if isinstance(section, dict) for n in section}
                     - {h.hostname for h in site.hosts()})
    if unknown:
        raise ValueError(f"{SIM_FILE} names hosts the site does not have: {', '.join(unknown)}")
    return {h.hostname: host_config(site, h, sim) for h in site.hosts()}


def image_target(content: bytes) -> tuple[str, str] | None:
    """(kind, version) the stand-in image installs, or None for content that is no image of ours."""
    found = IMAGE_HEADER.search(content[:4096])
    return None if found is None else (found.group(1).decode(), found.group(2).decode())
