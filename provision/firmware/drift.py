"""A host's firmware and BIOS against its class's baseline: every difference as a `Drift`. Pure, no I/O.

Versions are compared as vendors write them: split into numbers and words at every separator
(`2.19.1` < `2.19.10`, `U58 v2.44 (01/17/2025)` > `U58 v2.40 ...`, `GB200Nvl-25.07-7`), numbers as numbers,
words case-blind, a number newer than a word, a longer version newer than its prefix. An exact pin compares
the text (case and surrounding blanks aside). A pin that matches no component of the host is drift with
nothing seen: the site expects a part the BMC does not report (a baseline naming the wrong kind or id, or a
part missing). BIOS attributes compare by value, a string case-blind against a string, a number against its
decimal text (BMCs send `ActiveCores: 144`, sites may write "144").
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from provision.firmware.bios_resource import BiosState, Value
from provision.firmware.components import Component
from provision.site.firmware import ComponentPin, FirmwareBaseline

_TOKEN = re.compile(r"\d+|[A-Za-z]+")


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Sortable form of a version string: (1, number) for numbers, (0, word) for words."""
    return tuple((1, int(t)) if t.isdigit() else (0, t.lower()) for t in _TOKEN.findall(version))


def at_least(seen: str, minimum: str) -> bool:
    return version_key(seen) >= version_key(minimum)


def satisfies(seen: str | None, pin: ComponentPin) -> bool:
    if seen is None:
        return False
    if pin.version is not None:
        return seen.strip().lower() == pin.version.strip().lower()
    return pin.min_version is not None and at_least(seen, pin.min_version)


@dataclass(frozen=True)
class Drift:
    kind: Literal["firmware", "bios"]
    component: str  # firmware: the component's key (or the pin's label when none matched); bios: the attribute
    seen: str | None  # None: the BMC reports no such component / attribute
    wanted: str
    component_kind: str | None = None  # firmware: bios, bmc, hca...
    pin: str | None = None  # firmware: the baseline entry (kind[:id glob]) it breaks

    @property
    def reason(self) -> str:
        return f"{self.kind}_drift"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "seen": self.seen, "wanted": self.wanted}
        if self.kind == "firmware":
            out.update(kind=self.component_kind, pin=self.pin)
        return out

    def line(self) -> str:
        return f"{self.component}: {self.seen if self.seen is not None else 'absent'} (wanted {self.wanted})"


def matches(pin: ComponentPin, component: Component) -> bool:
    if component.kind.value != pin.kind:
        return False
    return pin.id is None or fnmatch.fnmatchcase(component.key, pin.id) or fnmatch.fnmatchcase(component.id, pin.id)


def pinned(baseline: FirmwareBaseline, components: Iterable[Component]) -> list[tuple[ComponentPin, Component]]:
    """Each component with the pin that holds it (the most specific one: with an id glob before a whole kind)."""
    ordered = sorted(baseline.components, key=lambda p: p.id is None)
    out = []
    for component in components:
        pin = next((p for p in ordered if matches(p, component)), None)
        if pin is not None:
            out.append((pin, component))
    return out


def firmware_drift(baseline: FirmwareBaseline, components: Iterable[Component]) -> list[Drift]:
    comps = list(components)
    held = pinned(baseline, comps)
    out = [Drift("firmware", c.key, c.version, pin.wanted, c.kind.value, pin.label)
           for pin, c in held if not satisfies(c.version, pin)]
    used = {pin.label for pin, _ in held}
    out.extend(Drift("firmware", pin.label, None, pin.wanted, pin.kind, pin.label)
               for pin in baseline.components if pin.label not in used)
    return out


def same_value(seen: Value, wanted: str | int | bool) -> bool:
    if isinstance(wanted, bool) or isinstance(seen, bool):
        return seen is wanted if isinstance(seen, bool) else str(seen).lower() == str(wanted).lower()
    if isinstance(wanted, int) and not isinstance(seen, str):
        return seen == wanted
    return seen is not None and str(seen).strip().lower() == str(wanted).strip().lower()


def _text(value: Value | str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def bios_drift(wanted: Mapping[str, str | int | bool], bios: BiosState) -> list[Drift]:
    out = []
    for name, want in wanted.items():
        present = name in bios.attributes
        seen = bios.attributes.get(name)
        if not present or not same_value(seen, want):
            out.append(Drift("bios", name, _text(seen) if present else None, _text(want)))
    return out


@dataclass(frozen=True)
class Judgement:
    """One host against its baseline; `unknown` where a part could not be read (never on baseline then)."""

    firmware: tuple[Drift, ...] = ()
    bios: tuple[Drift, ...] = ()
    unknown: tuple[str, ...] = ()  # what could not be judged and why

    @property
    def on_baseline(self) -> bool:
        return not self.firmware and not self.bios and not self.unknown

    def as_json(self) -> dict[str, Any]:
        return {"firmware": [d.as_json() for d in self.firmware], "bios": [d.as_json() for d in self.bios],
                "unknown": list(self.unknown)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Judgement:
        fw = tuple(Drift("firmware", d["component"], d["seen"], d["wanted"], d.get("kind"), d.get("pin"))
                   for d in data.get("firmware", ()))
        bios = tuple(Drift("bios", d["component"], d["seen"], d["wanted"]) for d in data.get("bios", ()))
        return cls(fw, bios, tuple(data.get("unknown", ())))


def judge(baseline: FirmwareBaseline | None, components: tuple[Component, ...] | None,
          bios: BiosState | None) -> Judgement:
    """Drift of what was read; a baseline part that was not read (no FirmwareInventory, no Bios) is unknown."""
    if baseline is None:
        return Judgement()
    unknown = []
    fw: list[Drift] = []
    if baseline.components:
        if components is None:
            unknown.append("firmware inventory not read")
        else:
            fw = firmware_drift(baseline, components)
    bd: list[Drift] = []
    if baseline.bios:
        if bios is None:
            unknown.append("BIOS attributes not read")
        else:
            bd = bios_drift(baseline.bios, bios)
    return Judgement(tuple(fw), tuple(bd), tuple(unknown))
