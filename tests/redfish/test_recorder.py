"""Group commit: concurrent hosts' changes share transactions, and one illegal change fails alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from provision.bmc.recorder import Recorder
from provision.errors import IllegalTransition
from provision.state import Change, State, StateStore


def test_concurrent_changes_share_commits_and_an_illegal_one_fails_alone(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site((f"h{i:02d}", "r") for i in range(40))

    async def go() -> tuple[list[object], int]:
        rec = Recorder(store)
        results = await asyncio.gather(
            # h07 would skip steps (declared → pxe_armed): illegal, and it must not sink the others
            *(rec.write(Change(f"h{i:02d}", State.pxe_armed if i == 7 else State.bmc_reachable, "test",
                               evidence={"i": i})) for i in range(40)),
            return_exceptions=True)
        await rec.close()
        return list(results), rec.commits

    results, commits = asyncio.run(go())
    assert isinstance(results[7], IllegalTransition)
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 7)
    assert store.in_state(State.bmc_reachable) == [f"h{i:02d}" for i in range(40) if i != 7]
    assert commits < 40
    assert store.history("h03")[-1].evidence == {"i": 3}


def test_a_change_is_on_disk_when_write_returns(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.sync_site([("h0", "r")])

    async def go() -> None:
        rec = Recorder(store)
        await rec.write(Change("h0", State.bmc_reachable, "test"))
        assert StateStore(tmp_path / "s.db").get("h0").state is State.bmc_reachable  # another connection sees it
        await rec.close()

    asyncio.run(go())
    with pytest.raises(IllegalTransition):
        asyncio.run(_illegal(store))


async def _illegal(store: StateStore) -> None:
    rec = Recorder(store)
    try:
        await rec.write(Change("h0", State.golden, "test"))
    finally:
        await rec.close()
