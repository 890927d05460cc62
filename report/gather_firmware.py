"""The report's firmware section: the fleet's versions per component beside the site's baseline, the baseline's
BIOS attributes as the hosts hold them, and every drift caught and fixed, from the state store alone (the
`host_firmware` table `provision firmware inventory` and the apply read-backs write, and the hosts' events of the
baseline steps). No inventory in the store: not run. A host counts once per version (its 8 HCAs on one version
are one host), as in `provision status`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provision.firmware.table import FirmwareRow, read_rows, version_spread
from provision.site.firmware import FirmwareBaseline
from provision.state import Event, StateStore
from provision.steps.pipeline import BASELINE_STEPS
from report.gather_hosts import stamp
from report.model import BiosSetting, ComponentVersions, Firmware, FirmwareEvent

COMMANDS = frozenset(spec.name for spec in BASELINE_STEPS)
MAX_EVENTS = 500
MAX_DETAIL = 600


def _wanted_versions(baselines: Iterable[FirmwareBaseline]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = {}
    for baseline in baselines:
        for pin in baseline.components:
            wanted.setdefault(pin.kind, set()).add(f"{pin.id}: {pin.wanted}" if pin.id else pin.wanted)
    return wanted


def _off(rows: Iterable[FirmwareRow]) -> dict[str, set[str]]:
    """Component kind -> the hosts whose last judgement finds a component of that kind off the baseline."""
    out: dict[str, set[str]] = {}
    for row in rows:
        for drift in row.judgement.get("firmware") or ():
            out.setdefault(str(drift.get("kind") or "other"), set()).add(row.hostname)
    return out


def components(rows: Sequence[FirmwareRow], baselines: Iterable[FirmwareBaseline]) -> tuple[ComponentVersions, ...]:
    wanted = _wanted_versions(baselines)
    off = _off(rows)
    return tuple(ComponentVersions(kind, "; ".join(sorted(wanted.get(kind, ()))), tuple(versions.items()),
                                   tuple(sorted(off.get(kind, ())))) for kind, versions in version_spread(rows).items())


def bios_settings(rows: Sequence[FirmwareRow], baselines: Mapping[str, FirmwareBaseline]) -> tuple[BiosSetting, ...]:
    """Each attribute some baseline names: the value wanted, the values the inventoried hosts whose baseline names it
    hold, who is off."""
    wanted: dict[str, set[str]] = {}
    for baseline in baselines.values():
        for name, value in baseline.bios.items():
            wanted.setdefault(name, set()).add(str(value))
    held: dict[str, Counter[str]] = {name: Counter() for name in wanted}
    off: dict[str, set[str]] = {name: set() for name in wanted}
    for row in rows:
        attributes = (row.inventory.get("bios") or {}).get("attributes") or {}
        for name in baselines[row.hostname].bios if row.hostname in baselines else ():
            held[name][str(attributes.get(name, "(absent)"))] += 1
        for drift in row.judgement.get("bios") or ():
            off.setdefault(str(drift.get("component")), set()).add(row.hostname)
    return tuple(BiosSetting(name, " / ".join(sorted(wanted[name])), tuple(sorted(held[name].items())),
                             tuple(sorted(off.get(name, ())))) for name in sorted(wanted))


def _changes(evidence: Mapping[str, Any]) -> list[str]:
    lines = []
    drift = evidence.get("drift")
    if isinstance(drift, dict):
        for d in [*drift.get("firmware", ()), *drift.get("bios", ())]:
            if isinstance(d, dict):
                lines.append(f"{d.get('component')}: {d.get('seen') or 'absent'} (wanted {d.get('wanted')})")
    for u in evidence.get("updates") or ():
        if isinstance(u, dict):
            lines.append(f"{u.get('pin')}: {', '.join(map(str, u.get('seen') or ())) or '?'} -> {u.get('wanted')} "
                         f"via {u.get('via')} ({u.get('image')}), task {u.get('state')}")
    settings = evidence.get("settings")
    if isinstance(settings, dict) and settings:
        lines.append("Bios/Settings " + ", ".join(f"{k}={v}" for k, v in settings.items())
                     + (f" ({evidence['apply_time']})" if evidence.get("apply_time") else ""))
    if isinstance(evidence.get("reboot"), dict):
        lines.append("rebooted, read back" + (": on its baseline" if evidence.get("on_baseline") else ""))
    return lines


def detail(evidence: Any) -> str:
    """One line of what a baseline step found or did, from its evidence."""
    if not isinstance(evidence, dict):
        return ""
    lines = _changes(evidence)
    text = "; ".join(lines) if lines else str(evidence.get("detail") or evidence.get("message") or "")
    if not text:
        text = json.dumps(evidence, sort_keys=True, default=str)
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL] + " … (cut)"


def events_of(events: Mapping[str, Sequence[Event]]) -> tuple[FirmwareEvent, ...]:
    """The baseline steps' moves, oldest first: each drift that failed a host and each fix that put it back."""
    found = sorted((e for items in events.values() for e in items if e.command in COMMANDS), key=lambda e: e.ts)
    return tuple(FirmwareEvent(stamp(e.ts), e.host, e.command, e.from_state.value if e.from_state else "",
                               e.to_state.value, e.reason or "", detail(e.evidence)) for e in found[-MAX_EVENTS:])


def firmware_section(store: StateStore, events: Mapping[str, Sequence[Event]],
                     baselines: Mapping[str, FirmwareBaseline]) -> Firmware:
    rows = sorted(read_rows(store).values(), key=lambda r: r.hostname)
    if not rows:
        return Firmware(False, 0, 0, (), (), events_of(events))
    return Firmware(True, len(rows), sum(1 for r in rows if r.on_baseline), components(rows, baselines.values()),
                    bios_settings(rows, baselines), events_of(events))
