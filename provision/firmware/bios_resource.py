"""The `Bios` resource of a ComputerSystem to a frozen `BiosState`, and its `@Redfish.Settings`. Pure, no I/O.

DMTF Bios.v1_2 (REFERENCE-wave3 B3): `AttributeRegistry`, `Attributes{}` (vendor names and values: strings,
integers, booleans, null), `@Redfish.Settings.SettingsObject` (where a change is PATCHed, usually
`.../Bios/Settings`) with `SupportedApplyTimes` (Settings v1_1+: Immediate, OnReset, AtMaintenanceWindowStart,
InMaintenanceWindowOnReset). Real payloads: NVIDIA GB300 (Supermicro; no SupportedApplyTimes), HPE iLO emulator
(DL380a), Dell R650 (SupportedApplyTimes OnReset, AtMaintenanceWindowStart, InMaintenanceWindowOnReset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from provision.state.peer_text import shown

MAX_ATTRIBUTES = 4096
MAX_VALUE = 256
APPLY_TIMES = ("Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset")

Value = str | int | float | bool | None


@dataclass(frozen=True)
class BiosState:
    path: str
    registry: str | None
    attributes: Mapping[str, Value]
    settings_path: str | None  # the SettingsObject a change is PATCHed to (None: the BMC names none)
    apply_times: tuple[str, ...]  # what the Settings annotation says the BMC supports (empty: not said)
    etag: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "registry": self.registry, "attributes": dict(self.attributes),
                "settings_path": self.settings_path, "apply_times": list(self.apply_times), "etag": self.etag}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BiosState:
        return cls(str(data["path"]), data.get("registry"), MappingProxyType(dict(data.get("attributes") or {})),
                   data.get("settings_path"), tuple(data.get("apply_times") or ()), data.get("etag"))


def _value(value: Any) -> Value:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return shown(value[:MAX_VALUE])
    return shown(repr(value)[:MAX_VALUE])  # a nested value is no BIOS attribute: kept as text, never as data


def parse_attributes(raw: Any) -> dict[str, Value]:
    if not isinstance(raw, Mapping):
        return {}
    return {shown(str(k)[:128]): _value(v) for k, v in list(raw.items())[:MAX_ATTRIBUTES]}


def _settings(data: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...], str | None]:
    settings = data.get("@Redfish.Settings")
    if not isinstance(settings, Mapping):
        return None, (), None
    obj = settings.get("SettingsObject")
    target = obj.get("@odata.id") if isinstance(obj, Mapping) else None
    times = settings.get("SupportedApplyTimes")
    supported = tuple(t for t in times if t in APPLY_TIMES) if isinstance(times, list) else ()
    etag = settings.get("ETag")
    return (target if isinstance(target, str) and target.startswith("/") else None, supported,
            etag if isinstance(etag, str) else None)


def parse_bios(data: Mapping[str, Any], path: str) -> BiosState:
    """A Bios resource as the BMC sent it."""
    settings_path, times, etag = _settings(data)
    registry = data.get("AttributeRegistry")
    return BiosState(path, shown(registry[:128]) if isinstance(registry, str) else None,
                     MappingProxyType(parse_attributes(data.get("Attributes"))), settings_path, times, etag)


def pending(settings: Mapping[str, Any]) -> dict[str, Value]:
    """The attributes a Bios/Settings resource holds for the next reset (empty once applied)."""
    return parse_attributes(settings.get("Attributes"))
