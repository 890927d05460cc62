"""Structured concurrency for the requests of one host: when one fails, its siblings are cancelled.

`asyncio.gather` leaves the other awaitables running after the first exception: they go on talking to
a BMC whose client is being closed (reopening its connection, unauthenticated) and end in "Task
exception was never retrieved". A TaskGroup cancels them and waits for them; this wrapper then raises
the first failure itself rather than an ExceptionGroup, so callers keep catching RedfishError.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first(exc)
        return exc
    return group  # pragma: no cover - a group always holds at least one exception


@contextlib.asynccontextmanager
async def task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """An asyncio.TaskGroup that raises its first failure unwrapped."""
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        raise _first(failed) from None


async def gather_or_cancel(*coros: Coroutine[Any, Any, T]) -> list[T]:
    """The results in order; the first failure cancels the rest and is raised."""
    async with task_group() as group:
        tasks = [group.create_task(c) for c in coros]
    return [t.result() for t in tasks]
