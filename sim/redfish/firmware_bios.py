"""A simulated BMC's Bios/Settings: when a PATCHed change applies (DSP0266 "Settings resource"; DMTF
Settings.v1_4_0 `@Redfish.SettingsApplyTime`, REFERENCE-wave3 B3).

The request body may carry `@Redfish.SettingsApplyTime` {ApplyTime, MaintenanceWindowStartTime,
MaintenanceWindowDurationInSeconds}; without it the change waits for the next reset (OnReset). An ApplyTime the
Bios's `@Redfish.Settings.SupportedApplyTimes` does not list is refused as a real BMC refuses it, 400 with the
Base registry's PropertyValueNotInList (a BMC that lists none takes OnReset only); a window mode without its start
time or duration is 400 PropertyMissing, one already over 400 PropertyValueNotInList. Then:
- Immediate: the BMC resets the host now and the change applies at that boot (at once if the host is off);
- OnReset: at the next boot;
- AtMaintenanceWindowStart: the BMC resets the host itself when the window starts (at once if it has started);
- InMaintenanceWindowOnReset: at the first boot inside the window; a boot outside it leaves the change pending.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sim.redfish.http import Response
from sim.redfish.messages import message

WINDOWED = ("AtMaintenanceWindowStart", "InMaintenanceWindowOnReset")


@dataclass(frozen=True)
class ApplyRule:
    when: str
    start: float | None = None  # the window, in epoch seconds
    end: float | None = None

    def applies_at_boot(self, now: float) -> bool:
        if self.when == "InMaintenanceWindowOnReset":
            return self.start is not None and self.end is not None and self.start <= now < self.end
        return True

    def as_json(self) -> dict[str, Any]:
        return {"ApplyTime": self.when, "start": self.start, "end": self.end}


def _bad(text: str, key: str = "PropertyValueNotInList") -> Response:
    return message(400, text, key)


def apply_rule(body: Mapping[str, Any], supported: tuple[str, ...], now: float | None = None) -> ApplyRule | Response:
    """When the change in `body` applies, or the 400 the BMC answers."""
    raw = body.get("@Redfish.SettingsApplyTime")
    if raw is None:
        return ApplyRule("OnReset")
    if not isinstance(raw, Mapping):
        return _bad("The value for the property @Redfish.SettingsApplyTime is not an object.")
    when = raw.get("ApplyTime", "OnReset")
    listed = supported or ("OnReset",)
    if when not in listed:
        return _bad(f"The value {when} for the property ApplyTime is not in the list of acceptable values.")
    if when not in WINDOWED:
        return ApplyRule(str(when))
    start_text, duration = raw.get("MaintenanceWindowStartTime"), raw.get("MaintenanceWindowDurationInSeconds")
    if not isinstance(start_text, str) or not isinstance(duration, int) or isinstance(duration, bool):
        return _bad(f"The property MaintenanceWindowStartTime and MaintenanceWindowDurationInSeconds are required "
                    f"with ApplyTime {when}.", "PropertyMissing")
    try:
        start = datetime.fromisoformat(start_text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return _bad(f"The value {start_text} for the property MaintenanceWindowStartTime is not in the list of "
                    "acceptable values.")
    if duration <= 0 or start + duration <= (time.time() if now is None else now):
        return _bad(f"The maintenance window starting {start_text} for {duration} s is over or empty: the value is "
                    "not in the list of acceptable values.")
    return ApplyRule(str(when), start, start + duration)


def schedule(rule: ApplyRule, restart: Callable[[], None], call_later: Callable[[float, Callable[[], None]], Any],
             now: float | None = None) -> None:
    """What the BMC does by itself for the rule: reset the host now (Immediate) or at the window's start."""
    if rule.when == "Immediate":
        restart()
    elif rule.when == "AtMaintenanceWindowStart" and rule.start is not None:
        call_later(max(0.0, rule.start - (time.time() if now is None else now)), restart)
