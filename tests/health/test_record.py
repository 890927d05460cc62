"""Health verdicts into the lifecycle: healthy, failed with reason and evidence, golden earned and lost."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provision.golden.step import promote_golden
from provision.health.record import eligibility, record_results
from provision.health.verdict import HostHealth, Problem, Verdict, unreachable
from provision.site import load_site
from provision.site.model import Site
from provision.ssh.errors import SshConnectTimeout
from provision.state import State, StateStore

SIM_SITE = Path(__file__).resolve().parents[2] / "inventory" / "sim" / "site.yml"


def _site(tmp_path: Path, requires_burn_in: bool) -> Site:
    doc = yaml.safe_load(SIM_SITE.read_text())
    doc.pop("fabric", None)  # the cabling design stays with the embedded site; health does not read it
    # the firmware baseline's golden gate is tests/firmware's: these hosts were never inventoried
    doc["policy"] = {"golden_requires_burn_in": requires_burn_in, "golden_requires_baseline": False}
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump(doc))
    return load_site(path)


def _store(site: Site, tmp_path: Path, state: State = State.configured) -> StateStore:
    store = StateStore(tmp_path / "state.db", actor="test")
    store.sync_site((h.hostname, h.rack) for h in site.hosts())
    for host in site.hosts():
        store.mark(host.hostname, state, reason="test setup")
    return store


def _healthy(host: str) -> HostHealth:
    return HostHealth(host, Verdict.healthy, None, "14 checks passed", (), 0.3,
                      {"verdict": "healthy", "report": {"checks": [{"check": "gpu_inventory", "status": "ok"}]}})


def _critical(host: str) -> HostHealth:
    problem = Problem("kernel_xid", "critical", "xid_79", "Xid 79: GPU has fallen off the bus", "Drain, RMA")
    return HostHealth(host, Verdict.critical, "xid_79", "kernel_xid: Xid 79", (problem,), 0.3,
                      {"verdict": "critical", "report": {"checks": []}})


def test_healthy_hosts_become_golden_when_the_site_does_not_require_burn_in(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=False)
    store = _store(site, tmp_path)
    recorded = record_results(site, store, [_healthy("gpu-r1-01"), _critical("gpu-r1-02")], "fast")
    assert recorded.promoted == ("gpu-r1-01",)
    assert store.get("gpu-r1-01").state is State.golden
    failed = store.get("gpu-r1-02")
    assert (failed.state, failed.reason) == (State.failed, "xid_79")
    assert failed.evidence["verdict"] == "critical"
    moves = [e.to_state for e in store.history("gpu-r1-01")]
    assert moves[-2:] == [State.healthy, State.golden]


def test_healthy_is_not_enough_when_the_site_requires_burn_in(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=True)
    store = _store(site, tmp_path)
    recorded = record_results(site, store, [_healthy("gpu-r1-01")], "fast")
    assert recorded.promoted == ()
    assert store.get("gpu-r1-01").state is State.healthy
    store.transition("gpu-r1-01", State.burned_in, command="fabric burnin")
    assert [o.host for o in promote_golden(site, store)] == ["gpu-r1-01"]
    assert store.get("gpu-r1-01").state is State.golden


def test_a_golden_host_loses_it_on_a_later_failure_and_earns_it_back(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=False)
    store = _store(site, tmp_path)
    record_results(site, store, [_healthy("gpu-r1-01")], "fast")
    assert store.in_state(State.golden) == ["gpu-r1-01"]
    record_results(site, store, [_critical("gpu-r1-01")], "fast")
    assert store.in_state(State.golden) == []
    assert store.get("gpu-r1-01").reason == "xid_79"
    record_results(site, store, [_healthy("gpu-r1-01")], "fast")
    assert store.in_state(State.golden) == ["gpu-r1-01"]


def test_unknown_is_recorded_as_failed_never_healthy(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=False)
    store = _store(site, tmp_path, State.golden)
    timeout = unreachable("gpu-r1-03", SshConnectTimeout("gpu-r1-03", "no SSH session within 5 s"), 5.0)
    record_results(site, store, [timeout], "fast")
    record = store.get("gpu-r1-03")
    assert (record.state, record.reason) == (State.failed, "ssh_connect_timeout")
    assert record.evidence["verdict"] == "unknown"


def test_a_re_check_of_a_golden_host_keeps_it_golden(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=True)
    store = _store(site, tmp_path, State.golden)
    recorded = record_results(site, store, [_healthy("gpu-r1-01")], "fast")
    assert store.get("gpu-r1-01").state is State.golden
    assert not any(m.changed for m in recorded.moves)


@pytest.mark.parametrize(
    ("setup", "eligible"),
    [(State.deployed, False), (State.configured, True), (State.healthy, True), (State.golden, True)],
)
def test_only_configured_hosts_are_checked(tmp_path: Path, setup: State, eligible: bool) -> None:
    site = _site(tmp_path, requires_burn_in=False)
    store = _store(site, tmp_path, setup)
    chosen, skipped = eligibility(store, ["gpu-r1-01"])
    assert (chosen == ["gpu-r1-01"]) is eligible
    assert ("gpu-r1-01" in skipped) is not eligible


def test_a_failed_host_is_rechecked_only_when_health_failed_it(tmp_path: Path) -> None:
    site = _site(tmp_path, requires_burn_in=False)
    store = _store(site, tmp_path)
    record_results(site, store, [_critical("gpu-r1-01")], "fast")
    store.fail("gpu-r1-02", "bmc_timeout", command="harvest-macs")
    chosen, skipped = eligibility(store, ["gpu-r1-01", "gpu-r1-02"])
    assert chosen == ["gpu-r1-01"]
    assert "bmc_timeout" in skipped["gpu-r1-02"]
