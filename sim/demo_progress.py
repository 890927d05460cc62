"""The demo's progress: each stage's title, its time and what it did to the hosts, read from the state store.

After each stage one line says how long it took, where the hosts it moved went, and which hosts it failed
with their reasons; at the end a table gives every stage's time and hosts, and the total.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from provision.state import State, StateStore


@dataclass(frozen=True)
class StageResult:
    title: str
    seconds: float
    moved: dict[str, int]  # state -> hosts that reached it in this stage
    failed: dict[str, str]  # host -> reason, failed in this stage


def _snapshot(db: Path) -> dict[str, tuple[str, str | None]]:
    if not db.exists():
        return {}
    with StateStore(db) as store:
        return {r.hostname: (r.state.value, r.reason) for r in store.hosts()}


@dataclass
class Progress:
    db: Path
    console: Console
    total: int
    results: list[StageResult] = field(default_factory=list)
    _started: float = 0.0
    _before: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    _title: str = ""

    def start(self, title: str) -> None:
        self._title, self._started, self._before = title, time.monotonic(), _snapshot(self.db)

    def finish(self) -> StageResult:
        after = _snapshot(self.db)
        changed = {h: s for h, s in after.items() if self._before.get(h) != s}
        failed = {h: str(reason) for h, (state, reason) in changed.items() if state == State.failed.value}
        moved = Counter(state for state, _ in changed.values() if state != State.failed.value)
        result = StageResult(self._title, time.monotonic() - self._started, dict(moved), failed)
        self.results.append(result)
        self.console.print(f"[bold cyan]stage {len(self.results)}/{self.total}[/] {result.title}: "
                           f"{result.seconds:.1f} s; {_describe(result)}", highlight=False)
        return result

    def summary(self) -> Table:
        table = Table(title="the bring-up, stage by stage")
        for column in ("#", "stage", "seconds", "hosts moved", "failed here"):
            table.add_column(column, justify="right" if column in ("#", "seconds") else "left")
        for n, r in enumerate(self.results, 1):
            moved = ", ".join(f"{count} {state}" for state, count in sorted(r.moved.items())) or "-"
            failed = ", ".join(f"{h} ({reason})" for h, reason in sorted(r.failed.items())) or "-"
            table.add_row(str(n), r.title, f"{r.seconds:.1f}", moved, failed)
        table.add_row("", "total", f"{sum(r.seconds for r in self.results):.1f}", "", "")
        return table


def _describe(result: StageResult) -> str:
    parts = [f"{count} -> {state}" for state, count in sorted(result.moved.items())]
    parts += [f"{host} failed ({reason})" for host, reason in sorted(result.failed.items())]
    return "; ".join(parts) or "no host moved"
