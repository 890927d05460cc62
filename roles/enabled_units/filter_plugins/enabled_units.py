"""Filter `enabled_units_todo`: the units of a list that are not in their wanted state.

Runs on the controller over the `systemctl list-unit-files` snapshot that the host_state role read once
per play; unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def unit_states(listing: str) -> dict[str, str]:
    """{unit: state} from `systemctl list-unit-files --no-legend` (UNIT STATE [PRESET])."""
    states: dict[str, str] = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            states[fields[0]] = fields[1]
    return states


def normalise(units: Iterable[str | Mapping[str, Any]]) -> list[dict[str, str]]:
    """Entries as {name, state}: a plain name means enabled."""
    return [{"name": unit, "state": "enabled"} if isinstance(unit, str)
            else {"state": "enabled", **{str(k): str(v) for k, v in unit.items()}} for unit in units]


def enabled_units_todo(listing: str, units: Iterable[str | Mapping[str, Any]]) -> list[dict[str, str]]:
    """The entries whose unit file is absent or in another state (a name without a suffix is a .service)."""
    states = unit_states(listing)
    return [unit for unit in normalise(units)
            if states.get(unit["name"] if "." in unit["name"] else unit["name"] + ".service", "") != unit["state"]]


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"enabled_units_todo": enabled_units_todo, "enabled_units_normalise": normalise}
