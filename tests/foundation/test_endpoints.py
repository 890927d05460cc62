"""`address:port` strings: IPv6 in brackets both ways, bad ports refused (in the site file too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provision.bmc.export import to_yaml
from provision.errors import SiteError
from provision.site import load_site
from provision.site.endpoints import join_host_port, split_host_port
from tests.redfish.simlab import write_site


def test_ipv6_addresses_are_bracketed_and_read_back() -> None:
    assert join_host_port("10.0.0.5", 443) == "10.0.0.5:443"
    assert join_host_port("fd00::1", 443) == "[fd00::1]:443"
    assert split_host_port("[fd00::1]:8443", 443) == ("fd00::1", 8443)
    assert split_host_port("[fd00::1]", 443) == ("fd00::1", 443)
    assert split_host_port("fd00::1", 22) == ("fd00::1", 22)  # a bare IPv6 address has no port
    assert split_host_port("gpu-a-01:2222", 22) == ("gpu-a-01", 2222)
    assert split_host_port("gpu-a-01", 22) == ("gpu-a-01", 22)


@pytest.mark.parametrize("value", ["10.0.0.5:ssh", "10.0.0.5:0", "10.0.0.5:70000", "[fd00::1]:x"])
def test_a_port_that_is_not_one_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="is not a number from 1 to 65535"):
        split_host_port(value, 22)


def test_a_bad_port_in_the_site_ssh_overrides_is_a_site_error(tmp_path: Path) -> None:
    path = write_site(tmp_path, 2, 443)
    data = yaml.safe_load(path.read_text())
    data.setdefault("ssh", {})["address_overrides"] = {"h000": "10.9.0.1:22x"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert any("address_overrides" in p and "22x" in p for p in caught.value.problems)


def test_the_maas_export_brackets_an_ipv6_bmc_address(tmp_path: Path) -> None:
    path = write_site(tmp_path, 1, 443)
    path.write_text(path.read_text().replace("127.0.16.1", "fd00::16:1"))
    site = load_site(path)
    assert site.hosts()[0].bmc.address == "fd00::16:1"
    text = to_yaml(site, {"h000": {"serial": "SN0", "pxe_nic": "NIC.Integrated.1-1-1", "pxe_mac": "02:f0:ce:00:00:01"}})
    assert yaml.safe_load(text)["hosts"]["h000"]["power"]["address"] == "[fd00::16:1]:443"
