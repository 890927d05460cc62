"""Shared lab for tests/ethernet: a small site's hosts, their Ethernet design and as-built cabling
(sim/switches/asbuilt.py), with the issue's faults: two crossed PXE cables, one unplugged, one port
error-disabled, one PXE NIC that LLDP hears but whose MAC the port never learns, and one switch per
switch-level fault."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from provision.ethernet.design import EthernetDesign, parse_design
from provision.site.credentials import Login, Secret
from sim.switches.asbuilt import EthernetFaults, LabHost, build
from sim.switches.harness import running

PASSWORD = "sw-Pa55-not-in-output"
SWITCH_FAULTS = {"tor-r3": "refuse_login", "tor-r4": "hang", "tor-r5": "page", "tor-r6": "unknown_format",
                 "tor-r7": "lldp_disabled"}


def lab_hosts(racks: int, per_rack: int) -> list[LabHost]:
    return [LabHost(f"gpu-r{r}-{u:02d}", f"r{r}", u, f"02:00:00:{r:02x}:01:{u:02x}", f"02:00:00:{r:02x}:02:{u:02x}")
            for r in range(1, racks + 1) for u in range(1, per_rack + 1)]


FAULTS = EthernetFaults(crossed=[("gpu-r1-03", "gpu-r1-04")], unplugged=["gpu-r2-07"], err_disabled=["gpu-r2-09"],
                        silent=["gpu-r1-06"])


def lab(racks: int, per_rack: int, faults: EthernetFaults) -> tuple[EthernetDesign, dict[str, Any]]:
    design, asbuilt = build(lab_hosts(racks, per_rack), faults)
    return parse_design(yaml.safe_dump(design), "ethernet.yml"), asbuilt


def login(_name: str) -> Login:
    return Login("admin", Secret(PASSWORD))


@pytest.fixture(scope="module")
def faulty_lab() -> Iterator[EthernetDesign]:
    """Seven racks: r1/r2 read cleanly (with the cabling faults), r3..r6 each with one switch fault that
    makes it unknown, r7 (NX-OS) read without LLDP."""
    faults = EthernetFaults(crossed=FAULTS.crossed, unplugged=FAULTS.unplugged, err_disabled=FAULTS.err_disabled,
                            silent=FAULTS.silent, switch_faults=SWITCH_FAULTS)
    design, asbuilt = lab(7, 12, faults)
    with running(asbuilt, PASSWORD):
        yield design
