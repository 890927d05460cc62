"""Host facts: their values checked and normalised, written with the moves that learn them, read typed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from provision.errors import IllegalTransition, StateError, UnknownHost
from provision.state import Change, HostFacts, State, StateStore, facts_from_inventory
from provision.state.facts import normalise_address, normalise_guid, normalise_mac
from provision.state.redact import MASK

HOSTS = [(f"gpu-{i:03d}", f"r{i // 32}") for i in range(512)]
# What `HostInventory.summary()` returns for a simulated XE9680 (see tests/fixtures/state/store-v1.db).
SUMMARY: dict[str, Any] = {
    "system_id": "System.Embedded.1", "serial": "CNFPV99JCXW5Z0", "service_tag": "G4M5RFH",
    "manufacturer": "Dell Inc.", "model": "PowerEdge XE9680", "bios_version": "1.14.1", "bmc_firmware": "7.10.30.00",
    "power_state": "Off", "health": "OK", "pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": "02:ba:cc:49:c6:6c",
    "pxe_source": "bios:PxeDev1",
    "macs": {"NIC.Embedded.1-1-1": "02:7a:57:26:f3:cc", "NIC.Integrated.1-1-1": "02:ba:cc:49:c6:6c",
             "FC.Slot.1-1": None},
    "links": {"NIC.Embedded.1-1-1": "LinkDown", "NIC.Integrated.1-1-1": "LinkUp", "FC.Slot.1-1": None},
    "gpus": 2, "ib_functions": 8,
}


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "state" / "site.db", actor="tester")
    s.sync_site(HOSTS[:4])
    return s


def harvested(store: StateStore, host: str, facts: dict[str, Any]) -> None:
    store.transition(host, State.bmc_reachable, command="harvest-macs")
    store.transition(host, State.macs_harvested, command="harvest-macs", facts=facts)


# values ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["B8:CE:F6:94:F0:B8", "b8-ce-f6-94-f0-b8", "b8ce.f694.f0b8", "B8CEF694F0B8",
                                  " b8:ce:f6:94:f0:b8 "])
def test_macs_are_stored_lower_case_with_colons(text: str) -> None:
    assert normalise_mac("pxe_mac", text) == "b8:ce:f6:94:f0:b8"


@pytest.mark.parametrize("text", ["b8:ce:f6:94:f0", "00:00:00:00:00:00", "01:00:5e:00:00:01", "zz:ce:f6:94:f0:b8",
                                  ""])
def test_a_value_that_is_no_nic_mac_is_refused_naming_the_fact(text: str) -> None:
    with pytest.raises(StateError, match="host fact bmc_mac"):
        normalise_mac("bmc_mac", text)


@pytest.mark.parametrize("text", ["0x98039B03009FBE9A", "98039b03009fbe9a", "9803:9b03:009f:be9a"])
def test_guids_are_stored_0x_prefixed_with_16_hex_digits(text: str) -> None:
    assert normalise_guid("hca_guids", text) == "0x98039b03009fbe9a"


def test_addresses_are_written_as_ipaddress_writes_them_and_names_lower_case() -> None:
    assert normalise_address("os_address", "10.0.0.7") == "10.0.0.7"
    assert normalise_address("os_address", "2001:DB8:0:0::7") == "2001:db8::7"
    assert normalise_address("os_address", "GPU-R1-01.Lab.Example.") == "gpu-r1-01.lab.example"
    for bad in ("10.0.0.300", "-gpu.lab", "gpu_01.lab", "a" * 64):
        with pytest.raises(StateError, match="host fact os_address"):
            normalise_address("os_address", bad)


def test_merge_changes_only_the_given_facts_and_none_clears_one() -> None:
    before = HostFacts(pxe_mac="02:00:00:00:00:01", serial="S1", maas_system_id="abc123")
    after = before.merged({"serial": "S2", "maas_system_id": None}, command="fix", at=5.0)
    assert after == HostFacts(pxe_mac="02:00:00:00:00:01", serial="S2", updated_at=5.0, updated_by="fix")


def test_facts_from_inventory_maps_what_the_harvest_saw() -> None:
    assert facts_from_inventory(SUMMARY) == {
        "pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": "02:ba:cc:49:c6:6c", "serial": "CNFPV99JCXW5Z0",
        "service_tag": "G4M5RFH", "bios_version": "1.14.1", "bmc_firmware": "7.10.30.00",
        "model": "PowerEdge XE9680", "redfish_system_id": "System.Embedded.1",
        "macs": {"NIC.Embedded.1-1-1": "02:7a:57:26:f3:cc", "NIC.Integrated.1-1-1": "02:ba:cc:49:c6:6c"},
    }


def test_facts_the_harvest_did_not_see_are_left_out_so_they_clear_nothing() -> None:
    summary = {**SUMMARY, "bios_version": None, "service_tag": None}
    assert {"bios_version", "service_tag"}.isdisjoint(facts_from_inventory(summary))


# the store ---------------------------------------------------------------------------------------


def test_a_known_host_without_facts_has_empty_ones_and_an_unknown_host_is_an_error(store: StateStore) -> None:
    assert store.facts("gpu-000") == HostFacts()
    with pytest.raises(UnknownHost):
        store.facts("nope")
    with pytest.raises(UnknownHost, match="nope"):
        store.facts_many(["gpu-000", "nope"])
    with pytest.raises(UnknownHost):
        store.set_facts("nope", command="test", serial="S1")


def test_facts_are_written_with_the_move_that_learnt_them(store: StateStore) -> None:
    harvested(store, "gpu-000", facts_from_inventory(SUMMARY))
    facts = store.facts("gpu-000")
    assert store.get("gpu-000").state is State.macs_harvested
    assert facts.pxe_mac == "02:ba:cc:49:c6:6c"
    assert facts.macs == {"NIC.Embedded.1-1-1": "02:7a:57:26:f3:cc", "NIC.Integrated.1-1-1": "02:ba:cc:49:c6:6c"}
    assert facts.updated_by == "harvest-macs"
    assert facts.updated_at == store.history("gpu-000")[-1].ts


def test_asyncio_callers_write_facts_with_their_move(store: StateStore) -> None:
    asyncio.run(store.atransition("gpu-000", State.bmc_reachable, command="harvest-macs",
                                  facts={"bmc_mac": "02:00:00:00:00:09"}))
    assert store.facts("gpu-000").bmc_mac == "02:00:00:00:00:09"


def test_a_batch_writes_facts_and_moves_in_one_transaction_or_nothing(store: StateStore) -> None:
    store.transition("gpu-001", State.bmc_reachable, command="t")
    ok = Change("gpu-001", State.macs_harvested, "harvest-macs", facts={"pxe_mac": "02:00:00:00:00:01"})
    illegal = Change("gpu-002", State.pxe_armed, "pxe-boot", facts={"pxe_mac": "02:00:00:00:00:02"})
    with pytest.raises(IllegalTransition):
        store.transition_many([ok, illegal])
    assert store.facts_many(["gpu-001", "gpu-002"]) == {"gpu-001": HostFacts(), "gpu-002": HostFacts()}
    assert store.get("gpu-001").state is State.bmc_reachable
    store.transition_many([ok])
    assert store.facts("gpu-001").pxe_mac == "02:00:00:00:00:01"


def test_a_refused_move_leaves_the_facts_unchanged(store: StateStore) -> None:
    store.set_facts("gpu-000", command="harvest-macs", pxe_mac="02:00:00:00:00:01")
    before = store.facts("gpu-000")
    with pytest.raises(IllegalTransition):
        store.transition("gpu-000", State.deployed, command="maas-deploy", facts={"maas_system_id": "abc123"})
    assert store.facts("gpu-000") == before


def test_an_invalid_fact_refuses_the_move_and_names_the_fact(store: StateStore) -> None:
    store.transition("gpu-000", State.bmc_reachable, command="t")
    with pytest.raises(StateError, match="host fact pxe_mac: 'not-a-mac'"):
        store.transition("gpu-000", State.macs_harvested, command="t", facts={"pxe_mac": "not-a-mac"})
    assert store.get("gpu-000").state is State.bmc_reachable
    with pytest.raises(StateError, match=r"host fact macs\[NIC.1\]"):
        store.set_facts("gpu-000", command="t", macs={"NIC.1": "02:00:00:00:00"})
    with pytest.raises(StateError, match="unknown host fact 'colour'"):
        store.set_facts("gpu-000", command="t", colour="blue")


def test_a_partial_update_keeps_the_other_facts(store: StateStore) -> None:
    store.set_facts("gpu-000", command="harvest-macs", pxe_mac="02:00:00:00:00:01", serial="S1",
                    hca_guids=["0x0000000000000001", "0000000000000002"])
    after = store.set_facts("gpu-000", command="maas-deploy", maas_system_id="abc123", serial="S2")
    assert after == store.facts("gpu-000")
    assert (after.pxe_mac, after.serial, after.maas_system_id) == ("02:00:00:00:00:01", "S2", "abc123")
    assert after.hca_guids == ("0x0000000000000001", "0x0000000000000002")
    assert after.updated_by == "maas-deploy"


def test_re_asking_for_a_reached_state_still_records_what_it_learnt(store: StateStore) -> None:
    harvested(store, "gpu-000", {"pxe_mac": "02:00:00:00:00:01"})
    outcome = store.transition("gpu-000", State.macs_harvested, command="harvest-macs",
                               facts={"pxe_mac": "02:00:00:00:00:02"})
    assert not outcome.changed
    assert store.facts("gpu-000").pxe_mac == "02:00:00:00:00:02"


def test_facts_are_current_values_not_history(store: StateStore) -> None:
    events = store.event_count()
    store.set_facts("gpu-000", command="t", os_address="10.0.0.7")
    assert store.event_count() == events


def test_facts_are_redacted_like_evidence(store: StateStore) -> None:
    facts = store.set_facts("gpu-000", command="t", serial="X token=hunter2", bios_version="1.0 password: hunter2")
    assert (facts.serial, facts.bios_version) == (f"X token={MASK}", f"1.0 password: {MASK}")
    with pytest.raises(StateError, match="host fact macs"):  # the MAC under a secret-named key is masked
        store.set_facts("gpu-000", command="t", macs={"api_token": "02:00:00:00:00:01"})


def test_facts_many_reads_512_hosts_in_one_query(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "site.db", actor="tester")
    store.sync_site(HOSTS)
    store.transition_many(Change(h, State.bmc_reachable, "t", facts={"pxe_mac": f"02:00:00:00:{i // 256:02x}:{i % 256:02x}"})
                          for i, (h, _) in enumerate(HOSTS))
    statements: list[str] = []
    store._conn().set_trace_callback(statements.append)  # this thread's connection: it runs every read
    found = store.facts_many([h for h, _ in HOSTS])
    everyone = store.facts_many()
    store._conn().set_trace_callback(None)
    assert len(statements) == 2
    assert found == everyone
    assert found["gpu-511"].pxe_mac == "02:00:00:00:01:ff"
    assert len({f.pxe_mac for f in found.values()}) == 512


def test_two_threads_writing_facts_lose_nothing(store: StateStore) -> None:
    start = threading.Barrier(2)

    def write(host: str, base: int) -> None:
        start.wait()
        for i in range(100):
            store.set_facts(host, command="t", pxe_mac=f"02:00:00:00:{base:02x}:{i:02x}")
            store.set_facts("gpu-003", command="t", **{("serial" if base == 1 else "service_tag"): f"V{i}"})

    threads = [threading.Thread(target=write, args=(host, n)) for n, host in ((1, "gpu-001"), (2, "gpu-002"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    facts = store.facts_many(["gpu-001", "gpu-002", "gpu-003"])
    assert (facts["gpu-001"].pxe_mac, facts["gpu-002"].pxe_mac) == ("02:00:00:00:01:63", "02:00:00:00:02:63")
    assert (facts["gpu-003"].serial, facts["gpu-003"].service_tag) == ("V99", "V99")
