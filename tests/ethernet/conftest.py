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
SWITCH_FAULTS = {"tor-r5": "refuse_login", "tor-r6": "hang", "tor-r7": "page", "tor-r8": "unknown_format",
                 "tor-r9": "lldp_disabled"}
# the faulty lab's racks take these in turn: r1 NX-OS, r2 EOS, r3 Dell OS10, r4 SONiC, r5 NX-OS, ...
PLATFORMS = ("cisco_nxos", "arista_eos", "dell_os10", "sonic")


def lab_hosts(racks: int, per_rack: int) -> list[LabHost]:
    return [LabHost(f"gpu-r{r}-{u:02d}", f"r{r}", u, f"02:00:00:{r:02x}:01:{u:02x}", f"02:00:00:{r:02x}:02:{u:02x}")
            for r in range(1, racks + 1) for u in range(1, per_rack + 1)]


FAULTS = EthernetFaults(crossed=[("gpu-r1-03", "gpu-r1-04")], unplugged=["gpu-r2-07"], err_disabled=["gpu-r2-09"],
                        silent=["gpu-r1-06"])


def lab(racks: int, per_rack: int, faults: EthernetFaults,
        platforms: tuple[str, ...] = PLATFORMS[:2]) -> tuple[EthernetDesign, dict[str, Any]]:
    design, asbuilt = build(lab_hosts(racks, per_rack), faults, platforms=platforms)
    return parse_design(yaml.safe_dump(design), "ethernet.yml"), asbuilt


def login(_name: str) -> Login:
    return Login("admin", Secret(PASSWORD))


@pytest.fixture(scope="module")
def faulty_lab() -> Iterator[EthernetDesign]:
    """Nine racks, the four platforms in turn: r1..r4 (NX-OS, EOS, Dell OS10, SONiC) read cleanly with the
    cabling faults (also a crossed pair on the OS10 switch, an unplugged cable on the SONiC one), r5..r8
    each with one switch fault that makes it unknown (refused login on NX-OS, hang on EOS, paging on OS10,
    unknown format on SONiC), r9 (NX-OS) read without LLDP."""
    faults = EthernetFaults(crossed=[*FAULTS.crossed, ("gpu-r3-01", "gpu-r3-02")],
                            unplugged=[*FAULTS.unplugged, "gpu-r4-05"], err_disabled=FAULTS.err_disabled,
                            silent=FAULTS.silent, switch_faults=SWITCH_FAULTS)
    design, asbuilt = lab(9, 12, faults, PLATFORMS)
    with running(asbuilt, PASSWORD):
        yield design
