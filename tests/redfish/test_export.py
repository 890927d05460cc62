"""DHCP exports of harvested MACs: ISC dhcpd host blocks and dnsmasq dhcp-host lines for every host
with a PXE MAC, under the site's host names, that the real dhcpd and dnsmasq accept; text from a BMC
never escapes its comment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from provision.bmc.export import to_dhcpd, to_dnsmasq
from provision.site import Site, load_site
from tests.redfish.simlab import write_site

EVIL_SERIAL = 'SN1\n}\nhost evil { hardware ethernet 02:00:00:00:00:99; }\ndhcp-host=02:00:00:00:00:99,evil'


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return load_site(write_site(tmp_path, 4, 443))


def inventories() -> dict[str, dict[str, Any]]:
    return {
        "h000": {"serial": "SN0", "pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": "02:f0:ce:00:00:01"},
        "h001": {"serial": EVIL_SERIAL, "pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": "02:f0:ce:00:00:02"},
        "h002": {"serial": "SN2", "pxe_nic": None, "pxe_mac": None},  # harvested, but no PXE NIC: no lease
        # h003 was never harvested
    }


def test_dhcpd_has_one_host_block_per_pxe_mac_under_the_site_host_name(site: Site) -> None:
    text = to_dhcpd(site, inventories())
    blocks = [line for line in text.splitlines() if line.startswith("host ")]
    assert blocks == ["host h000 {  # rack r00, serial SN0, NIC.Integrated.1-1-1",
                      "host h001 {  # rack r00, serial SN1 } host evil { hardware ethernet 02:00:00:00:00:99; } "
                      "dhcp-host=02:00:00:00:00:99,evil, NIC.Integrated.1-1-1"]
    assert "  hardware ethernet 02:f0:ce:00:00:01;\n  option host-name \"h000\";\n}" in text
    assert [line for line in text.splitlines() if "hardware ethernet" in line and not line.startswith("host")] == [
        "  hardware ethernet 02:f0:ce:00:00:01;", "  hardware ethernet 02:f0:ce:00:00:02;"]


def test_dnsmasq_has_one_dhcp_host_line_per_pxe_mac(site: Site) -> None:
    text = to_dnsmasq(site, inventories())
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "dhcp-host=02:f0:ce:00:00:01,h000", "dhcp-host=02:f0:ce:00:00:02,h001"]


@pytest.mark.skipif(shutil.which("dhcpd") is None, reason="ISC dhcpd (Debian isc-dhcp-server) not installed")
def test_isc_dhcpd_accepts_the_reservations(site: Site, tmp_path: Path) -> None:
    conf = tmp_path / "dhcpd.conf"
    conf.write_text(to_dhcpd(site, inventories()))
    done = subprocess.run(["dhcpd", "-t", "-cf", str(conf)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    conf.write_text(to_dhcpd(site, inventories()).replace(";\n  option", "\n  option", 1))  # the check can fail
    assert subprocess.run(["dhcpd", "-t", "-cf", str(conf)], capture_output=True, timeout=30).returncode != 0


@pytest.mark.skipif(shutil.which("dnsmasq") is None, reason="dnsmasq (Debian dnsmasq-base) not installed")
def test_dnsmasq_accepts_the_reservations(site: Site, tmp_path: Path) -> None:
    conf = tmp_path / "dnsmasq.conf"
    conf.write_text(to_dnsmasq(site, inventories()))
    done = subprocess.run(["dnsmasq", "--test", f"--conf-file={conf}"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "syntax check OK" in done.stderr, done.stderr
    conf.write_text(to_dnsmasq(site, inventories()) + "dhcp-host-typo=02:f0:ce:00:00:09,x\n")  # the check can fail
    assert subprocess.run(["dnsmasq", "--test", f"--conf-file={conf}"], capture_output=True, timeout=30).returncode != 0
