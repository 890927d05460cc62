"""Group commit: concurrent hosts' changes share transactions, and one illegal change fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from provision.bmc import HarvestStep, RunOptions
from provision.errors import IllegalTransition
from provision.redfish import ClientOptions
from provision.site import load_site
from provision.state import Change, Move, State, StateStore
from provision.steps.recorder import Recorder
from tests.redfish.simlab import PASSWORD_VAR, free_port, write_site


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


class _SlowDisk(StateStore):
    """A store whose commits take 0.3 s, as fsync does on a busy disk."""

    def transition_many(self, changes: Iterable[Change]) -> list[Move]:
        time.sleep(0.3)
        return super().transition_many(changes)


class _BrokenDisk(StateStore):
    def transition_many(self, changes: Iterable[Change]) -> list[Move]:
        raise sqlite3.OperationalError("disk I/O error")


def test_a_writer_whose_deadline_fires_during_the_commit_stalls_nobody(tmp_path: Path) -> None:
    store = _SlowDisk(tmp_path / "s.db")
    store.sync_site((f"h{i}", "r") for i in range(4))

    async def go() -> list[object]:
        rec = Recorder(store)

        async def impatient() -> None:
            async with asyncio.timeout(0.05):  # gives up while its change is being committed
                await rec.write(Change("h0", State.bmc_reachable, "test"))

        results = await asyncio.gather(impatient(), *(rec.write(Change(f"h{i}", State.bmc_reachable, "test"))
                                                      for i in (1, 2)), return_exceptions=True)
        results.append(await rec.write(Change("h3", State.bmc_reachable, "test")))  # the writer still works
        await rec.close()
        return results

    results = asyncio.run(asyncio.wait_for(go(), 30))
    assert isinstance(results[0], TimeoutError)
    assert all(not isinstance(r, BaseException) for r in results[1:])
    assert store.in_state(State.bmc_reachable) == ["h0", "h1", "h2", "h3"]  # h0's change was committed anyway


def test_a_store_that_fails_fails_every_waiting_writer_instead_of_hanging_them(tmp_path: Path) -> None:
    store = _BrokenDisk(tmp_path / "s.db")
    store.sync_site((f"h{i}", "r") for i in range(3))

    async def go() -> list[object]:
        rec = Recorder(store)
        results = await asyncio.gather(*(rec.write(Change(f"h{i}", State.bmc_reachable, "test")) for i in range(3)),
                                       return_exceptions=True)
        await rec.close()
        return list(results)

    results = asyncio.run(asyncio.wait_for(go(), 30))
    assert all(isinstance(r, sqlite3.OperationalError) for r in results)


def test_a_store_that_fails_while_hosts_fail_is_reported_per_host_and_escapes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_VAR, "pw")
    site = load_site(write_site(tmp_path, 3, free_port()))  # nothing listens: every host fails unreachable
    store = _BrokenDisk(tmp_path / "s.db")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    options = RunOptions(client=ClientOptions(timeout_s=2, retries=0))
    results = asyncio.run(asyncio.wait_for(HarvestStep(site, store, options).run(site.hosts()), 60))
    assert [r.reason for r in results] == ["bmc_unreachable"] * 3
    assert all("NOT recorded in the state store: OperationalError: disk I/O error" in r.detail for r in results)
