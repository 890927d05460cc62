"""Group commit of lifecycle changes from many concurrent host tasks.

Each caller awaits until its change is committed (so `kill -9` afterwards loses nothing it was told
is recorded). Changes that arrive while a commit is running go into the next one, so 500 hosts
finishing together cost a handful of SQLite transactions, not 500 fsyncs, and no caller waits longer
than one commit for its turn. One writer thread owns the writes. Intents (`provision.state.intents`: a
change about to be asked of a peer, or its close) go through the same writer: an intent's caller awaits it on
disk before it makes the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from provision.errors import StateError
from provision.state import Change, Move, StateStore
from provision.state.intents import Ask, Outcome, begin_in, close


@dataclass(frozen=True)
class Settle:
    """Intents to close, with how and what the run saw."""

    ids: tuple[int, ...]
    outcome: Outcome
    observed: Mapping[str, Any] | None


Write = Change | Ask | Settle
Written = Move | int | None


@dataclass
class _Pending:
    change: Write
    done: asyncio.Future[Written] = field(repr=False)


class Recorder:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state-writer")
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0

    async def write(self, change: Change) -> Move:
        outcome = await self._submit(change)
        assert isinstance(outcome, Move)
        return outcome

    async def intend(self, ask: Ask) -> int:
        """Write an intent; its id, once it is on disk."""
        written = await self._submit(ask)
        assert isinstance(written, int)
        return written

    async def settle(self, settle: Settle) -> None:
        await self._submit(settle)

    async def _submit(self, change: Write) -> Written:
        loop = asyncio.get_running_loop()
        item = _Pending(change, loop.create_future())
        self._pending.append(item)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await item.done

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        batch: list[_Pending] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    results = await loop.run_in_executor(self._executor, self._commit, [p.change for p in batch])
                except Exception as exc:  # the store itself failed (disk full, I/O): every waiter hears it
                    results = [exc] * len(batch)
                for item, result in zip(batch, results, strict=True):
                    if item.done.done():  # its host's deadline cancelled the wait; the change is committed
                        continue
                    if isinstance(result, BaseException):
                        item.done.set_exception(result)
                    else:
                        item.done.set_result(result)
                batch = []
        finally:
            # Cancelled mid-commit (the run is being torn down): nobody may wait forever, and what was
            # failed here must not be committed by a later flush.
            dropped, self._pending = batch + self._pending, []
            for item in dropped:
                if not item.done.done():
                    item.done.set_exception(StateError("the state writer stopped: this change may not have been "
                                                       "committed"))

    def _commit(self, writes: list[Write]) -> list[Written | BaseException]:
        self.commits += 1
        out: dict[int, Written | BaseException] = {}
        intents = [(i, w) for i, w in enumerate(writes) if not isinstance(w, Change)]
        if intents:  # before the moves: a move of the same batch may settle an intent written here
            with self.store.transaction() as db:
                for i, w in intents:
                    if isinstance(w, Ask):
                        out[i] = begin_in(db, w)
                    else:
                        close(db, w.ids, w.outcome, w.observed)
                        out[i] = None
        moves = [(i, w) for i, w in enumerate(writes) if isinstance(w, Change)]
        for (i, _), moved in zip(moves, self._moves([w for _, w in moves]), strict=True):
            out[i] = moved
        return [out[i] for i in range(len(writes))]

    def _moves(self, changes: list[Change]) -> list[Move | BaseException]:
        if not changes:
            return []
        try:
            return list(self.store.transition_many(changes))
        except StateError:
            pass  # one change is illegal (say, an operator marked the host meanwhile): apply one by one
        out: list[Move | BaseException] = []
        for change in changes:
            try:
                out.extend(self.store.transition_many([change]))
            except StateError as exc:
                out.append(exc)
        return out

    async def close(self) -> None:
        if self._flusher is not None:
            await self._flusher
        self._executor.shutdown(wait=True)
