"""Fake /sys trees in the kernel's layout, for the in-process collectors (tests and fixture generation).

Values follow what the kernel writes: ``ports/N/state`` is "4: ACTIVE", ``phys_state`` "5: LinkUp",
``rate`` "400 Gb/sec (4X NDR)" (drivers/infiniband/core/sysfs.c), PCI link speed "32.0 GT/s PCIe"
(drivers/pci/pci-sysfs.c).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

IB_COUNTERS = (
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "port_rcv_constraint_errors", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_constraint_errors",
    "port_xmit_discards", "symbol_error",
)


@dataclass
class FakePort:
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    link_layer: str = "InfiniBand"
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class FakeHca:
    name: str
    bdf: str
    fw_ver: str = "28.39.1002"
    ports: list[FakePort] = field(default_factory=lambda: [FakePort()])


@dataclass
class FakePci:
    bdf: str
    vendor: str
    klass: str
    driver: str
    speed: str = "32.0 GT/s PCIe"
    width: str = "16"
    max_speed: str = "32.0 GT/s PCIe"
    max_width: str = "16"
    # PCIe ports above the device, root port first: (bdf, max_link_speed); the trained speed matches the max.
    bridges: tuple[tuple[str, str], ...] = ()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")


def make_pci(root: Path, devices: list[FakePci]) -> None:
    for dev in devices:
        parent = root / "sys/devices/pci0000:00"
        for bridge, bridge_speed in dev.bridges:
            parent = parent / bridge
            for name, value in (("current_link_speed", bridge_speed), ("max_link_speed", bridge_speed),
                                ("current_link_width", "16"), ("max_link_width", "16")):
                _write(parent / name, value)
        real = parent / dev.bdf
        for name, value in (("vendor", dev.vendor), ("class", dev.klass), ("current_link_speed", dev.speed),
                            ("current_link_width", dev.width), ("max_link_speed", dev.max_speed),
                            ("max_link_width", dev.max_width)):
            _write(real / name, value)
        driver_dir = root / "sys/bus/pci/drivers" / dev.driver
        driver_dir.mkdir(parents=True, exist_ok=True)
        os.symlink(driver_dir, real / "driver")
        link = root / "sys/bus/pci/devices" / dev.bdf
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(real, link)


def make_ib(root: Path, hcas: list[FakeHca]) -> None:
    base = root / "sys/class/infiniband"
    base.mkdir(parents=True, exist_ok=True)
    for hca in hcas:
        d = base / hca.name
        _write(d / "fw_ver", hca.fw_ver)
        _write(d / "board_id", "MT_0000000838")
        _write(d / "hca_type", "MT4129")
        real = root / "sys/devices/pci0000:00" / hca.bdf
        real.mkdir(parents=True, exist_ok=True)
        os.symlink(real, d / "device")
        for i, port in enumerate(hca.ports, start=1):
            p = d / "ports" / str(i)
            _write(p / "state", port.state)
            _write(p / "phys_state", port.phys_state)
            _write(p / "rate", port.rate)
            _write(p / "link_layer", port.link_layer)
            for counter in IB_COUNTERS:
                _write(p / "counters" / counter, str(port.counters.get(counter, 0)))


def two_hcas(port_down: bool = False) -> list[FakeHca]:
    second = FakePort("1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)") if port_down else FakePort()
    return [FakeHca("mlx5_0", "0000:3b:00.0"), FakeHca("mlx5_1", "0000:5e:00.0", ports=[second])]


def hca_functions() -> list[FakePci]:
    return [FakePci("0000:3b:00.0", "0x15b3", "0x020700", "mlx5_core"),
            FakePci("0000:5e:00.0", "0x15b3", "0x020700", "mlx5_core")]
