"""Findings of a validation: what is wrong, where (both ends, physical location), and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fabric.design import Location

KINDS = (
    "missing_link",
    "unexpected_link",
    "miswired",
    "swapped",
    "degraded",
    "rate_unknown",
    "port_down",
    "missing_device",
    "unknown_device",
    "partition",
    "duplicate_guid",
)


@dataclass(frozen=True, slots=True)
class FEnd:
    """One end of a finding: a port (or a whole node when `port` is None)."""

    guid: str | None
    name: str | None
    port: int | None = None
    location: Location | None = None
    description: str | None = None

    def label(self) -> str:
        who = self.name or (f"GUID {self.guid}" if self.guid else "?")
        if self.name is None and self.description:
            who += f' ("{self.description}")'
        return f"{who}[{self.port}]" if self.port is not None else who

    def where(self) -> str:
        return f"{self.label()} ({self.location})" if self.location else self.label()

    def to_dict(self) -> dict[str, object]:
        return {
            "guid": f"0x{self.guid}" if self.guid and not self.guid.startswith("lid-") else self.guid,
            "name": self.name,
            "port": self.port,
            "location": self.location.to_dict() if self.location else None,
            "description": self.description,
        }


@dataclass(frozen=True)
class Finding:
    kind: str
    a: FEnd | None
    b: FEnd | None
    expected: str
    seen: str
    fix: str
    tier: str | None = None
    cable: str | None = None
    details: Mapping[str, object] = field(default_factory=dict)
    at: str = "a"  # which end the fix happens at ("a" or "b")

    def where(self) -> FEnd | None:
        """The end a technician walks to (the worklist's row): the end the fix is at, else one with a location."""
        first = self.b if self.at == "b" else self.a
        if first is not None and first.location is not None:
            return first
        ends = [e for e in (self.a, self.b) if e is not None]
        located = [e for e in ends if e.location is not None]
        pick = located or ends
        return pick[0] if pick else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "a": self.a.to_dict() if self.a else None,
            "b": self.b.to_dict() if self.b else None,
            "expected": self.expected,
            "seen": self.seen,
            "fix": self.fix,
            "tier": self.tier,
            "cable": self.cable,
        }
        out.update(self.details)
        return out

    def line(self) -> str:
        ends = " <-> ".join(e.where() for e in (self.a, self.b) if e is not None)
        head = f"{self.kind}: {ends}" if ends else self.kind
        return f"{head}: expected {self.expected}; seen {self.seen}. Fix: {self.fix}"
