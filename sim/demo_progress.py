"""The demo's progress: each stage's title, its time and what it did to the hosts, read from the state store.

On a terminal a live table (rich) shows every stage so far with its hosts: done (moved on in this stage),
failed here, and in progress (the hosts the stage acts on that have not moved yet), refreshed from the state
store twice a second. Without a terminal (tests, CI) it degrades to plain lines: after each stage one line says
how long it took, where the hosts it moved went, which hosts it failed with their reasons, and which it failed and
put back within the stage (the firmware stage's drift, caught and fixed). At the end a table gives every stage's
time and hosts, and the total.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from provision.state import State, StateStore

Snapshot = Mapping[str, tuple[str, str | None]]  # host -> (state, reason)


@dataclass(frozen=True)
class StageResult:
    title: str
    seconds: float
    moved: dict[str, int]  # state -> hosts that reached it in this stage
    failed: dict[str, str]  # host -> reason, failed in this stage
    back: dict[str, str] = field(default_factory=dict)  # host -> reason: failed here, back in the flow by the end


@dataclass(frozen=True)
class StageView:
    """One row of the live table: a stage's hosts at one moment."""

    title: str
    seconds: float
    done: int  # hosts this stage moved on (not to failed)
    failed: int  # hosts this stage failed
    in_progress: int  # hosts the stage acts on, not moved yet
    running: bool


def stage_view(title: str, seconds: float, before: Snapshot, now: Snapshot, takes: frozenset[str],
               running: bool) -> StageView:
    """The stage's hosts from the snapshot at its start and one now (pure)."""
    changed = {h: s for h, s in now.items() if before.get(h) != s}
    failed = sum(1 for state, _ in changed.values() if state == State.failed.value)
    waiting = sum(1 for h, (state, _) in now.items() if h not in changed and state in takes) if running else 0
    return StageView(title, seconds, len(changed) - failed, failed, waiting, running)


def render(views: Sequence[StageView], total: int) -> Table:
    """The live table: every stage so far, the running one last (pure: tested on a recorded sequence)."""
    table = Table(title=f"bring-up: stage {len(views)}/{total}")
    for column in ("#", "stage", "s", "done", "failed", "in progress"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for n, v in enumerate(views, 1):
        mark = "[yellow]>[/]" if v.running else "[green]ok[/]"
        table.add_row(f"{mark} {n}", v.title, f"{v.seconds:.0f}", str(v.done),
                      f"[red]{v.failed}[/]" if v.failed else "0", str(v.in_progress) if v.running else "-")
    return table


def round_trips(failures: Iterable[tuple[str, str | None]], now: Snapshot) -> dict[str, str]:
    """Hosts a stage failed (its `failed` events, in order) that are not failed at its end: host -> the reason
    (pure)."""
    out: dict[str, str] = {}
    for host, reason in failures:
        if host in now and now[host][0] != State.failed.value:
            out[host] = str(reason)
    return out


def _last_event(db: Path) -> int:
    if not db.exists():
        return 0
    with StateStore(db) as store:
        return int(store.reader().execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0])


def _failures_since(db: Path, after: int) -> list[tuple[str, str | None]]:
    with StateStore(db) as store:
        rows = store.reader().execute("SELECT host, reason FROM events WHERE id > ? AND to_state = ? ORDER BY id",
                                      (after, State.failed.value)).fetchall()
    return [(str(r[0]), r[1]) for r in rows]


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
    _events_before: int = 0
    _title: str = ""
    _takes: frozenset[str] = frozenset()
    _views: list[StageView] = field(default_factory=list)
    _live: Any = None

    def start(self, title: str, takes: frozenset[str] = frozenset(), since: float | None = None) -> None:
        """The stage begins (at `since`, a monotonic time, when its work began earlier)."""
        self._title, self._started, self._before = title, since or time.monotonic(), _snapshot(self.db)
        self._events_before = _last_event(self.db)
        self._takes = takes
        if self.console.is_terminal and self._live is None:
            from rich.live import Live

            self._live = Live(get_renderable=self._renderable, console=self.console, refresh_per_second=2,
                              transient=True)
            self._live.start()

    def _renderable(self) -> Table:
        now = stage_view(self._title, time.monotonic() - self._started, self._before, _snapshot(self.db),
                         self._takes, True)
        return render([*self._views, now], self.total)

    def finish(self) -> StageResult:
        after = _snapshot(self.db)
        changed = {h: s for h, s in after.items() if self._before.get(h) != s}
        failed = {h: str(reason) for h, (state, reason) in changed.items() if state == State.failed.value}
        moved = Counter(state for state, _ in changed.values() if state != State.failed.value)
        back = round_trips(_failures_since(self.db, self._events_before), after) if self.db.exists() else {}
        result = StageResult(self._title, time.monotonic() - self._started, dict(moved), failed, back)
        self.results.append(result)
        self._views.append(stage_view(self._title, result.seconds, self._before, after, self._takes, False))
        self.console.print(f"[bold cyan]stage {len(self.results)}/{self.total}[/] {result.title}: "
                           f"{result.seconds:.1f} s; {_describe(result)}", highlight=False)
        return result

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def summary(self) -> Table:
        table = Table(title="the bring-up, stage by stage")
        for column in ("#", "stage", "seconds", "hosts moved", "failed here"):
            table.add_column(column, justify="right" if column in ("#", "seconds") else "left")
        for n, r in enumerate(self.results, 1):
            moved = ", ".join(f"{count} {state}" for state, count in sorted(r.moved.items())) or "-"
            failed = ", ".join([*(f"{h} ({reason})" for h, reason in sorted(r.failed.items())),
                                *(f"{h} ({reason}, fixed)" for h, reason in sorted(r.back.items()))]) or "-"
            table.add_row(str(n), r.title, f"{r.seconds:.1f}", moved, failed)
        table.add_row("", "total", f"{sum(r.seconds for r in self.results):.1f}", "", "")
        return table


def _describe(result: StageResult) -> str:
    parts = [f"{count} -> {state}" for state, count in sorted(result.moved.items())]
    parts += [f"{host} failed ({reason})" for host, reason in sorted(result.failed.items())]
    parts += [f"{host} failed ({reason}) and was put back" for host, reason in sorted(result.back.items())]
    return "; ".join(parts) or "no host moved"
