"""A PXE MAC is one host's: a BMC reporting another server's NICs fails the later harvest
(`duplicate_pxe_mac`, naming the holder) instead of recording the MAC twice, and the DHCP exports
reserve a MAC that two hosts claim for neither."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from provision.bmc import step
from provision.bmc.export import to_dhcpd, to_dnsmasq
from provision.bmc.operations import contested_pxe_macs
from provision.bmc.step import HarvestStep
from provision.site import Site, load_site
from provision.state import State, StateStore
from tests.redfish.simlab import PASSWORD_VAR, write_site

MAC = "02:f0:ce:00:00:01"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.setenv(PASSWORD_VAR, "pw")
    return load_site(write_site(tmp_path, 4, 443))


@pytest.fixture
def store(tmp_path: Path, site: Site) -> StateStore:
    db = StateStore(tmp_path / "state.db")
    db.sync_site([(h.hostname, h.rack) for h in site.hosts()])
    return db


def _fake_bmcs(monkeypatch: pytest.MonkeyPatch, pxe_macs: dict[str, str]) -> None:
    """Each host's BMC answers with the PXE MAC given for it (h002's BMC reporting h001's NICs)."""

    @contextlib.asynccontextmanager
    async def session(self: HarvestStep, host: Any) -> AsyncIterator[Any]:
        yield host.hostname

    async def find_system(bmc: str) -> Any:
        return SimpleNamespace(path=f"/redfish/v1/Systems/{bmc}")

    async def harvest(bmc: str, cls: Any, system: Any) -> Any:
        await asyncio.sleep(0.01 * int(bmc[-1]))  # h001 is harvested before h002
        mac = pxe_macs[bmc]
        summary = {"pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": mac, "macs": {"NIC.Integrated.1-1-1": mac}}
        return SimpleNamespace(summary=lambda: summary, pxe=SimpleNamespace(source="bios", detail=""),
                               cross_check={}, notes=(), raw={})

    monkeypatch.setattr(HarvestStep, "session", session)
    monkeypatch.setattr(step, "find_system", find_system)
    monkeypatch.setattr(step, "harvest", harvest)
    monkeypatch.setattr(step, "check_inventory", lambda inventory, cls: None)


def test_two_bmcs_reporting_one_pxe_mac_in_one_run_fail_the_later_host_naming_the_first(
        site: Site, store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_bmcs(monkeypatch, {"h001": MAC, "h002": MAC, "h003": "02:f0:ce:00:00:03"})
    hosts = [h for h in site.hosts() if h.hostname != "h000"]
    results = {r.host: r for r in asyncio.run(HarvestStep(site, store).run(hosts))}
    assert results["h001"].ok and results["h003"].ok
    failed = results["h002"]
    assert failed.reason == "duplicate_pxe_mac" and "h001" in failed.detail and MAC in failed.detail
    assert failed.data["other_host"] == "h001" and "re-run `provision harvest-macs` for both" in failed.remediation
    assert store.get("h002").state is State.failed and store.facts("h002").pxe_mac is None
    assert store.facts("h001").pxe_mac == MAC


def test_a_pxe_mac_recorded_for_a_host_not_in_the_run_fails_the_harvested_host(
        site: Site, store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.transition("h000", State.bmc_reachable, command="test")
    store.transition("h000", State.macs_harvested, command="test", facts={"pxe_mac": MAC})
    _fake_bmcs(monkeypatch, {"h001": MAC})
    (result,) = asyncio.run(HarvestStep(site, store).run([site.host("h001")]))  # type: ignore[list-item]
    assert result.reason == "duplicate_pxe_mac" and result.data["other_host"] == "h000"
    assert store.facts("h001").pxe_mac is None and store.facts("h000").pxe_mac == MAC
    assert contested_pxe_macs(store) == {MAC: ["h001"]}


def test_a_host_harvested_again_does_not_clash_with_its_own_earlier_record(
        site: Site, store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.transition("h001", State.bmc_reachable, command="test", facts={"pxe_mac": MAC})  # an earlier harvest's
    _fake_bmcs(monkeypatch, {"h001": MAC})
    (result,) = asyncio.run(HarvestStep(site, store).run([site.host("h001")]))  # type: ignore[list-item]
    assert result.ok, result


def test_dhcp_exports_reserve_a_pxe_mac_two_hosts_claim_for_neither_and_say_so(site: Site) -> None:
    inventories = {"h000": {"pxe_mac": MAC}, "h001": {"pxe_mac": MAC}, "h002": {"pxe_mac": "02:f0:ce:00:00:03"},
                   "h003": {"pxe_mac": "02:f0:ce:00:00:04"}}
    for text in (to_dhcpd(site, inventories, {"02:f0:ce:00:00:04": ["h002"]}),
                 to_dnsmasq(site, inventories, {"02:f0:ce:00:00:04": ["h002"]})):
        assert MAC not in "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        assert "02:f0:ce:00:00:04" not in "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        assert f"# REFUSED {MAC}: claimed by h000, h001 (duplicate_pxe_mac)" in text
        assert "# REFUSED 02:f0:ce:00:00:04: claimed by h002, h003" in text
        assert "02:f0:ce:00:00:03" in text.replace("# REFUSED", "")  # h002's own MAC is still reserved
