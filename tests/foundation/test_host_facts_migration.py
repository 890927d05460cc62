"""Opening a schema-1 store (written by the code before host facts, see tests/fixtures/state/) migrates it."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from provision.errors import StateError
from provision.state import HostFacts, State, StateStore, facts_from_inventory
from provision.state.facts import normalise_facts
from provision.state.migrate import SCHEMA_VERSION

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state" / "store-v1.db"


@pytest.fixture
def v1_db(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "site.db"
    path.parent.mkdir()
    shutil.copyfile(FIXTURE, path)
    return path


def dump(path: Path, *tables: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return [(t, *row) for t in tables for row in db.execute(f"SELECT * FROM {t} ORDER BY 1")]


def schema_version(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def test_the_fixture_is_a_schema_1_store() -> None:
    assert schema_version(FIXTURE) == "1"
    with sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "host_facts" not in tables


def test_opening_a_v1_store_back_fills_the_facts_from_history(v1_db: Path) -> None:
    with StateStore(v1_db) as store:
        facts = store.facts_many()
        harvest = {h: [e for e in store.history(h) if e.to_state is State.macs_harvested][-1] for h in facts}
        deploys = {h: [e for e in store.history(h) if e.command == "maas-deploy"] for h in facts}
    assert sorted(facts) == ["gpu-r1-01", "gpu-r1-02", "gpu-r1-03"]
    for host, found in facts.items():
        learnt = normalise_facts(facts_from_inventory(harvest[host].evidence["inventory"]))
        assert {k: v for k, v in found.known().items() if k != "maas_system_id"} == learnt
        assert found.pxe_mac is not None and found.macs is not None and found.pxe_mac in found.macs.values()
    assert facts["gpu-r1-01"].maas_system_id == deploys["gpu-r1-01"][-1].evidence["system_id"]
    assert deploys["gpu-r1-02"][-1].to_state is State.failed  # a failed deployment still names its machine
    assert facts["gpu-r1-02"].maas_system_id == deploys["gpu-r1-02"][-1].evidence["system_id"]
    assert facts["gpu-r1-03"].maas_system_id is None and not deploys["gpu-r1-03"]
    assert (facts["gpu-r1-01"].updated_by, facts["gpu-r1-01"].updated_at) == ("maas-deploy", deploys["gpu-r1-01"][-1].ts)
    assert (facts["gpu-r1-03"].updated_by, facts["gpu-r1-03"].updated_at) == ("harvest-macs", harvest["gpu-r1-03"].ts)
    assert schema_version(v1_db) == str(SCHEMA_VERSION)


def test_migration_leaves_hosts_and_history_untouched(v1_db: Path) -> None:
    before = dump(v1_db, "hosts", "events")
    StateStore(v1_db).close()
    assert dump(v1_db, "hosts", "events") == before


def test_a_second_open_of_a_migrated_store_changes_nothing(v1_db: Path) -> None:
    StateStore(v1_db).close()
    before = dump(v1_db, "meta", "hosts", "events", "host_facts")
    StateStore(v1_db).close()
    assert dump(v1_db, "meta", "hosts", "events", "host_facts") == before


def test_a_store_of_a_newer_schema_is_refused_and_left_alone(v1_db: Path) -> None:
    with sqlite3.connect(v1_db) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StateError, match=f"schema version {SCHEMA_VERSION + 1}"):
        StateStore(v1_db)
    assert schema_version(v1_db) == str(SCHEMA_VERSION + 1)
    with sqlite3.connect(v1_db) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'host_facts'").fetchone()[0] == 0


def test_an_odd_value_in_old_evidence_is_skipped_not_fatal(v1_db: Path) -> None:
    with sqlite3.connect(v1_db) as db:
        db.execute("UPDATE events SET evidence = json_set(evidence, '$.inventory.pxe_mac', 'garbage') "
                   "WHERE host = 'gpu-r1-03' AND to_state = 'macs_harvested'")
    with StateStore(v1_db) as store:
        facts = store.facts("gpu-r1-03")
    assert facts.pxe_mac is None and facts.serial is not None


def test_a_new_store_starts_at_the_current_schema_with_no_facts(tmp_path: Path) -> None:
    with StateStore(tmp_path / "site.db") as store:
        store.sync_site([("gpu-000", "r0")])
        assert store.facts("gpu-000") == HostFacts()
    assert schema_version(tmp_path / "site.db") == str(SCHEMA_VERSION)
