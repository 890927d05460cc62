"""What `provision firmware|bios apply` would do: per host the updates or settings, in waves. Pure, no I/O.

The input is each host's last inventory (`host_firmware`) judged against its class's baseline. A host gets:
- for firmware: every drifted component whose pin names an image (components of one pin share one image and
  one SimpleUpdate), host firmware before the BMC's own (the BMC restarts after its update); a pin that names
  components by id (`gpu:HGX_FW_GPU_*`) sends them as the update's Targets;
- for BIOS: every drifted attribute with the value wanted.
Hosts that cannot be planned say why (never inventoried, failed for another reason, a drift without image).
Waves: the first `canary` hosts alone, then batches of `batch_size`, in site order; reboots inside a wave are
further bounded per rack and site-wide by the runner (rollout.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from provision.firmware.drift import Judgement
from provision.firmware.reasons import BASELINE_REASONS
from provision.site.firmware import ComponentPin, FirmwareImage, FirmwareRollout
from provision.site.model import Site

Operation = Literal["firmware", "bios"]


@dataclass(frozen=True)
class Update:
    pin: str  # the baseline entry's label (kind[:id glob])
    kind: str
    components: tuple[str, ...]  # the drifted components' keys
    seen: tuple[str | None, ...]
    wanted: str
    image: FirmwareImage
    targeted: bool = False  # the pin names components by id: the update names them as its Targets

    def as_json(self) -> dict[str, Any]:
        out = {"pin": self.pin, "kind": self.kind, "components": list(self.components), "seen": list(self.seen),
               "wanted": self.wanted, "image": self.image.file}
        return {**out, "targeted": True} if self.targeted else out


@dataclass(frozen=True)
class HostPlan:
    host: str
    rack: str
    updates: tuple[Update, ...] = ()
    settings: Mapping[str, str | int | bool] = field(default_factory=dict)
    blocked: str | None = None  # why nothing can be done for it

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "rack": self.rack}
        if self.updates:
            out["updates"] = [u.as_json() for u in self.updates]
        if self.settings:
            out["settings"] = dict(self.settings)
        if self.blocked:
            out["blocked"] = self.blocked
        return out


@dataclass(frozen=True)
class RolloutPlan:
    operation: Operation
    hosts: tuple[HostPlan, ...]  # the hosts to change, in site order
    blocked: tuple[HostPlan, ...]
    waves: tuple[tuple[str, ...], ...]
    on_baseline: int
    unmatched: tuple[str, ...] = ()  # baseline pins that no inventoried host reports a component for
    canary: bool = False  # the first wave is the canary (its failure stops the rollout)

    def host(self, name: str) -> HostPlan:
        return next(h for h in self.hosts if h.host == name)

    def as_json(self) -> dict[str, Any]:
        return {"operation": self.operation, "hosts": [h.as_json() for h in self.hosts],
                "blocked": [h.as_json() for h in self.blocked], "waves": [list(w) for w in self.waves],
                "on_baseline": self.on_baseline, "unmatched": list(self.unmatched), "canary": self.canary}


def waves(names: Sequence[str], rollout: FirmwareRollout) -> tuple[tuple[str, ...], ...]:
    out = [tuple(names[:rollout.canary])] if rollout.canary and names else []
    rest = names[rollout.canary:] if rollout.canary else names
    out += [tuple(rest[i:i + rollout.batch_size]) for i in range(0, len(rest), rollout.batch_size)]
    return tuple(w for w in out if w)


def _updates(judged: Judgement, pins: Mapping[str, ComponentPin]) -> tuple[tuple[Update, ...], list[str]]:
    grouped: dict[str, list[tuple[str, str | None]]] = {}
    for d in judged.firmware:
        grouped.setdefault(d.pin or d.component, []).append((d.component, d.seen))
    out, missing = [], []
    for label, comps in grouped.items():
        pin = pins.get(label)
        if pin is None or pin.image is None or all(seen is None for _, seen in comps):
            missing.append(label if pin is None or pin.image is not None else f"{label} (no image pinned)")
            continue
        present = [(c, s) for c, s in comps if s is not None]
        out.append(Update(label, pin.kind, tuple(c for c, _ in present), tuple(s for _, s in present), pin.wanted,
                          pin.image, pin.id is not None))
    out.sort(key=lambda u: u.kind == "bmc")  # the BMC's own firmware last: it restarts after it
    return tuple(out), missing


def plan_rollout(site: Site, operation: Operation, judgements: Mapping[str, Judgement | None],
                 states: Mapping[str, tuple[str, str | None]], hosts: Sequence[str] | None = None) -> RolloutPlan:
    """`judgements`: each host's last judgement (None: never inventoried); `states`: (state, reason)."""
    wanted = set(hosts) if hosts is not None else None
    todo: list[HostPlan] = []
    blocked: list[HostPlan] = []
    on_baseline = 0
    pinned_on: dict[str, int] = {}  # pin label -> inventoried hosts whose class pins it
    absent_on: dict[str, int] = {}  # pin label -> of those, hosts that report no component for it
    for h in site.hosts():
        if wanted is not None and h.hostname not in wanted:
            continue
        baseline = site.host_class(h).firmware
        if baseline is None:
            continue
        judged = judgements.get(h.hostname)
        state, reason = states.get(h.hostname, ("declared", None))
        if judged is None:
            blocked.append(HostPlan(h.hostname, h.rack, blocked="never inventoried: run `provision firmware "
                                    "inventory` first"))
            continue
        for pin in baseline.components:
            pinned_on[pin.label] = pinned_on.get(pin.label, 0) + 1
        for d in judged.firmware:
            if d.seen is None and d.pin == d.component:
                absent_on[d.component] = absent_on.get(d.component, 0) + 1
        drifts = judged.firmware if operation == "firmware" else judged.bios
        if not drifts:
            on_baseline += 1
            continue
        if state == "failed" and reason not in BASELINE_REASONS:
            blocked.append(HostPlan(h.hostname, h.rack, blocked=f"failed ({reason}): fix that first"))
            continue
        if operation == "bios":
            todo.append(HostPlan(h.hostname, h.rack, settings={d.component: baseline.bios[d.component]
                                                              for d in judged.bios}))
            continue
        updates, missing = _updates(judged, {p.label: p for p in baseline.components})
        if missing:
            blocked.append(HostPlan(h.hostname, h.rack, updates,
                                    blocked="cannot update " + ", ".join(missing) + ": not reported by the BMC or "
                                    "no image in the baseline"))
            if not updates:
                continue
        todo.append(HostPlan(h.hostname, h.rack, updates))
    names = [p.host for p in todo]
    unmatched = tuple(sorted(label for label, n in pinned_on.items() if absent_on.get(label) == n))
    rollout = site.spec.firmware_rollout
    return RolloutPlan(operation, tuple(todo), tuple(blocked), waves(names, rollout), on_baseline, unmatched,
                       canary=bool(rollout.canary and names))
