"""How every step command shows its run: a progress bar while hosts finish, the failed-hosts table
(reason, what happened, what to do), the triage line, JSON rows, and the exit status."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from provision.command.exits import ProblemsFound
from provision.command.output import console, esc, get_console
from provision.steps.runner import HostResult, Progress

T = TypeVar("T")


class HostsFailed(ProblemsFound):
    """Some hosts failed this run (each is in the table/JSON above and recorded with its reason): exit 2."""


def result_json(r: HostResult) -> dict[str, Any]:
    out: dict[str, Any] = {"host": r.host, "ok": r.ok, "skipped": r.skipped}
    if r.reason:
        out.update(reason=r.reason, detail=r.detail, remediation=r.remediation)
    if r.ok or r.skipped:
        out["data"] = r.data
    else:
        out["evidence"] = r.data
    if r.reconciled:
        out["reconciled"] = list(r.reconciled)
    return out


def render_reconciled(results: list[HostResult]) -> None:
    """What the run found on its start of a dead run's changes and recorded, a line each."""
    for r in results:
        for line in r.reconciled:
            console.print(f"[yellow]reconciled[/] {esc(line)}")


def counts(results: list[HostResult]) -> dict[str, int]:
    c = Counter("failed" if r.failed else ("already" if r.skipped else "done") for r in results)
    failed_before = sum(1 for r in results if r.skipped and not r.ok)
    return {"done": c["done"], "already": c["already"] - failed_before, "failed": c["failed"],
            "skipped_failed_earlier": failed_before}


def render_failures(results: list[HostResult]) -> None:
    """The reconciled lines, then the failed-hosts table and the triage line."""
    from rich.table import Table

    render_reconciled(results)
    failed = [r for r in results if r.failed]
    if not failed:
        return
    table = Table(title=f"failed hosts ({len(failed)})", title_justify="left")
    for col in ("host", "reason", "what happened", "what to do"):
        table.add_column(col, overflow="fold", no_wrap=col in ("host", "reason"))
    for r in sorted(failed, key=lambda r: (r.reason or "", r.host)):
        table.add_row(esc(r.host), f"[red]{esc(r.reason)}[/]", esc(r.detail), esc(r.remediation))
    console.print(table)
    by_reason = Counter(r.reason for r in failed)
    console.print("triage: " + ", ".join(f"{esc(reason)} x{n}" for reason, n in sorted(by_reason.items())))


def fail_if_any(results: list[HostResult]) -> None:
    failed = [r for r in results if r.failed]
    if failed:
        reasons = Counter(r.reason for r in failed)
        summary = ", ".join(f"{reason} x{n}" for reason, n in sorted(reasons.items()))
        raise HostsFailed(f"{len(failed)} of {len(results)} hosts failed ({summary})")


def with_progress(run: Callable[[Progress | None], Coroutine[Any, Any, T]], total: int, what: str,
                  json_out: bool) -> T:
    """`run(progress)` under a progress bar counting hosts done and failed (none with --json)."""
    if json_out:
        return asyncio.run(run(None))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("[red]{task.fields[failed]} failed"), TimeElapsedColumn())
    with Progress(*columns, console=get_console(), transient=True) as bar:
        task = bar.add_task(what, total=total, failed=0)

        def advance(result: HostResult) -> None:
            # A host skipped because it failed in an earlier run is not a failure of this one.
            bar.update(task, advance=1, failed=bar.tasks[task].fields["failed"] + (1 if result.failed else 0))

        return asyncio.run(run(advance))
